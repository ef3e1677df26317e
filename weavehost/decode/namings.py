"""Where a call begins in a reply's free text: a trigger, and whether JSON after it names a
tool on offer, or only tools whose call is refused now.

A format's own tag (``<tool_call>``; any trigger with no layout of its own, such as Llama 3's
bare ``{"name"``) is a call as soon as it is written, except where calls may be made while some
tool is refused: the JSON after it is then judged in the format's own layout (the one the call
would be written in), so a tag that goes on to name only refused tools is taken back at their
name, as bare JSON is, instead of its whole call being written and then not run (SmolLM2-135M,
shown a result, opens the same call again in most of its answers). A tag still judged where the
reply ends or reaches its bound is a call there, as an unjudged one is
(:meth:`Namings.undecided_tag`): a tag is never left in an answer's text.

Where calls may be made, a call the turn has made already (``made``: each as the format writes
it in each layout, :func:`made_texts`) is judged too: JSON (after a tag or bare) that names such
a call's tool whole is a call only once it leaves every such call's text, and is taken back
once it has written one whole, through its arguments' closing brace (an exact repeat, which the
session would drop once written: SmolLM2-135M, shown an error, writes the same call again).

Stage: decoding (used by :class:`~weavehost.decode.continuation.Continuation` at every token of free
text, and on the drafted text ahead of it). No model: the offered and refused tools in, bytes
in, verdicts out; each layout's namings are made once per reply.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from weavehost.decode.trigger_scan import first_trigger
from weavehost.errors import FormatError
from weavehost.formats.base import (
    CallLayout,
    LayoutView,
    ModelFormat,
    ToolCall,
    Trigger,
    call_parts,
)

__all__ = ["Namings", "made_texts"]


class Namings:
    """The tools ``offered`` to a reply and those of them ``refused`` (a call to one is taken
    back where JSON names it), and how JSON in each call layout names each."""

    def __init__(
        self,
        offered: Sequence[str],
        refused: Collection[str],
        own: CallLayout | None = None,
        made: Mapping[CallLayout, Sequence[str]] | None = None,
    ) -> None:
        self.offered = tuple(offered)
        self.refused = frozenset(refused)
        self.own = own  # the format's own layout: a tag's call is written in it
        # Per layout, the texts of the calls made this turn, through their arguments' close;
        # judged only where calls may be made (``own`` given).
        self.made = {k: tuple(v) for k, v in (made or {}).items() if v} if own else {}
        # Per layout: the length of its text before a name, and each tool's naming.
        self._namings: dict[CallLayout, tuple[int, dict[str, str]]] = {}

    def scan(
        self, text: bytes, triggers: Sequence[tuple[Trigger, bytes]], skip: int
    ) -> tuple[int, Trigger | None, int]:
        """Where a call begins in ``text`` and with which trigger (``None``: none does yet),
        and from where the text is not known prose (``skip``, at least the one given). JSON
        that cannot name a tool on offer is prose; JSON that can name only refused tools, its
        name begun, is a trigger already (the reply takes it back there)."""
        at, trigger = first_trigger(text, triggers, skip)
        verdict = self.names_a_tool(text[at:], trigger) if at >= 0 else None
        while verdict is False:
            skip = at + 1
            at, trigger = first_trigger(text, triggers, skip)
            verdict = self.names_a_tool(text[at:], trigger) if at >= 0 else None
        if verdict is None and at >= 0 and self.refuses(text[at:], trigger):
            return at, trigger, skip  # not a whole naming yet, but only a refused tool's
        return at, (trigger if verdict else None), skip

    def names_a_tool(self, text: bytes, trigger: Trigger) -> bool | None:
        """Whether what the model wrote from ``trigger`` on is a call (None: not yet known). A
        trigger with a layout of its own (JSON that may be a call) is one only once it names a
        tool on offer, and is not once it cannot. The format's tags are (the strategy then
        picks the tool), at once where no tool is refused (:meth:`judged_in`); else once what
        follows names a tool whole or leaves the layout, not yet while it may still name one
        (one that can only be refused is taken back: :meth:`refuses`)."""
        layout = self.judged_in(trigger)
        if layout is None:
            return True
        could, whole = self.could_name(text, layout)
        if whole:  # a call, unless it may still be one the turn made (:meth:`repeats`)
            return None if self.repeats(text, layout) is None else True
        if could:
            return None
        return trigger.layout is None  # a tag that leaves its layout is a call; JSON is prose

    def refuses(self, text: bytes, trigger: Trigger) -> bool:
        """Whether the JSON ``text`` begins (after a tag, in the format's own layout) can name
        only refused tools, its name begun (``{"name": "get_b``), or is a call the turn made,
        written whole (:meth:`repeats`): taken back then."""
        layout = self.judged_in(trigger)
        if layout is None:
            return False
        if self.repeats(text, layout):
            return True
        could, _ = self.could_name(text, layout, begun=True) if self.refused else ([], False)
        return bool(could) and self.refused.issuperset(could)

    def repeats(self, text: bytes, layout: CallLayout) -> bool | None:
        """Whether ``text`` (JSON in ``layout``) is a call the turn made, written again: True
        once it holds one's text whole, ``None`` while it is still the beginning of one's
        (not yet known), False once it is neither."""
        made = self.made.get(layout)
        if not made:
            return False
        written = text.decode("utf-8", errors="ignore")
        if any(written.startswith(call) for call in made):
            return True
        return None if any(call.startswith(written) for call in made) else False

    def undecided_tag(
        self, text: bytes, triggers: Sequence[tuple[Trigger, bytes]], skip: int
    ) -> tuple[int, Trigger] | None:
        """A format's tag whose JSON :meth:`scan` still judges in ``text`` (its name not yet
        whole), or JSON that names a tool whole and is still judged as a repeat: where it
        begins, and its trigger; ``None`` where there is none."""
        at, trigger, skip = self.scan(text, triggers, skip)
        if at < 0 or trigger is not None:
            return None
        at, tag = first_trigger(text, triggers, skip)
        if tag is None:
            return None
        if tag.layout is None or self.could_name(text[at:], tag.layout)[1]:
            return at, tag  # a tag, or JSON naming a tool whole (judged as a repeat): a call
        return None

    def repeat_rest(self, text: bytes, triggers: Sequence[tuple[Trigger, bytes]], skip: int) -> str:
        """Where ``text`` ends in JSON still judged that names a tool whole and is the
        beginning of a call the turn made (:meth:`repeats`), the rest of that call's text
        through its arguments' close: a draft the reply verifies in one pass, so a repeat is
        judged in a pass or two, not a pass a token. ``""`` elsewhere (before the name is
        whole another tool may follow), or where the text ends inside a character."""
        undecided = self.undecided_tag(text, triggers, skip) if self.made else None
        if undecided is None:
            return ""
        at, trigger = undecided
        layout = self.judged_in(trigger)
        if layout is None or not self.could_name(text[at:], layout)[1]:
            return ""
        try:
            written = text[at:].decode("utf-8")
        except UnicodeDecodeError:
            return ""
        calls = self.made.get(layout, ())
        return next((c[len(written) :] for c in calls if c.startswith(written)), "")

    def judged_in(self, trigger: Trigger) -> CallLayout | None:
        """The layout the text from ``trigger`` on is judged in: the trigger's own; for a tag
        (no layout of its own) while some tool is refused, the format's own, the one its call
        is written in (:func:`~weavehost.formats.base.call_format`); ``None``: a tag that is a
        call at once. Text that does not go on in that layout names nothing in it, so the tag
        is then a call as before (:meth:`names_a_tool`)."""
        if trigger.layout is not None:
            return trigger.layout
        return self.own if self.refused or self.made else None

    def could_name(
        self, text: bytes, layout: CallLayout, *, begun: bool = False
    ) -> tuple[list[str], bool]:
        """The offered tools whose naming in ``layout`` ``text`` is or may still become, and
        whether it is one whole (``begun``: none before the name begins); namings made once."""
        if layout not in self._namings:  # the layout's text before a name, and each naming
            names = {n: layout.naming(n) for n in self.offered}
            self._namings[layout] = (len(layout.naming("")) - 1, names)
        head, namings = self._namings[layout]
        written = text.decode("utf-8", errors="ignore")
        if begun and len(written) <= head:
            return [], False
        could = [n for n, naming in namings.items() if naming.startswith(written[: len(naming)])]
        return could, any(written.startswith(namings[n]) for n in could)


def made_texts(fmt: ModelFormat, calls: Sequence[ToolCall]) -> dict[CallLayout, list[str]]:
    """Each of ``calls`` as ``fmt`` writes it in its own layout and in each layout its triggers
    read, up to and with its arguments' closing brace (what :meth:`Namings.repeats` compares);
    a call a layout cannot write is left out of it."""
    views = [fmt] + [LayoutView(fmt, t.layout) for t in fmt.triggers if t.layout is not None]
    texts: dict[CallLayout, list[str]] = {}
    for view in views:
        layout = view.layout
        for call in calls:
            try:
                parts = call_parts(view, call)  # type: ignore[arg-type]
            except FormatError:
                continue
            close = layout.tail[:1] if layout.tail.startswith("}") else layout.tail
            texts.setdefault(layout, []).append("".join(t for t, _ in parts[:-1]) + close)
    return texts
