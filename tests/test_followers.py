"""The tokens a model wrote after each token and pair of tokens: what they draft, and when not."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

from weavehost.decode.followers import Followers


def written(*texts: list[int]) -> Followers:
    """The followers of each text, each read token by token from its start."""
    followers = Followers()
    for text in texts:
        for at in range(1, len(text)):
            followers.add(text[:at], text[at])
    return followers


def test_the_token_written_most_often_after_the_last_two_is_drafted_and_the_chain_goes_on() -> None:
    followers = written([1, 2, 3, 4, 5], [1, 2, 3, 4, 6], [1, 2, 3, 4, 5])
    assert followers.draft([1, 2], 10) == ([3, 4, 5], 3)  # 5 after (3, 4) twice of three times
    assert followers.draft([1, 2], 2) == ([3, 4], 3)  # at most the room


def test_a_pair_never_written_falls_back_to_the_last_token_alone() -> None:
    followers = written([7, 8, 9], [5, 8, 9])
    assert followers.draft([6, 8], 1) == ([9], 2)  # (6, 8) never written; 9 after 8 twice


def test_a_token_written_no_more_often_than_all_others_together_drafts_nothing() -> None:
    followers = written([1, 2, 3], [1, 2, 4])
    assert followers.draft([1, 2], 5) == ([], 0)  # 3 and 4 once each after (1, 2)
    assert written([1, 2, 3], [1, 2, 3], [1, 2, 4]).draft([1, 2], 1) == ([3], 2)


def test_a_context_never_written_drafts_nothing() -> None:
    assert written([1, 2, 3]).draft([9, 9], 5) == ([], 0)
    assert Followers().draft([], 5) == ([], 0)


def test_past_its_cap_the_context_used_least_recently_is_forgotten() -> None:
    followers = Followers(cap=3)
    for at in range(1, 3):
        followers.add([1, 2, 3][:at], [1, 2, 3][at])  # contexts (1,), (2,), (1, 2)
    assert len(followers) == 3 and followers.draft([1, 2], 1) == ([3], 1)  # (1, 2) read: newest
    followers.add([5], 6)  # a fourth context: (1,) goes, the least recently used
    assert len(followers) == 3
    assert followers.draft([1], 1) == ([], 0) and followers.draft([1, 2], 1) == ([3], 1)
    assert followers.draft([5], 1) == ([6], 1)
