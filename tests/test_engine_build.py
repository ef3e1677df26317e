"""The llama-cpp-python build the README installs (``native.BUILD_CMAKE_ARGS``), and what the
engine does with another.

llama.cpp's AMX kernels crash the first pass on some Intel Xeon machines (llama.cpp issue
#20824): where the build has them, the engine loads models without llama.cpp's extra buffer
types and says once how to rebuild, and the stock peers refuse to run rather than crash the
benchmark or run another engine than the one they are compared with. llamafile's sgemm makes a
wide pass's rows part from one-row passes' with flash attention off: the install leaves it out
(what that keeps exact: tests/test_engine.py)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

import weavehost.bench.peer as peer_module
import weavehost.engine.native as native
from weavehost.bench.agent_peer import PEERS, Launch
from weavehost.bench.peer import LlamaCppPythonPeer
from weavehost.errors import BenchError

LLAMA_LOG = "weavehost.engine.llama_cpp"


def _extra_buffers(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The model buffers llama.cpp reported that are not its plain CPU ones."""
    return [
        record.getMessage()
        for record in caplog.records
        if "model buffer size" in record.getMessage() and "CPU_Mapped" not in record.getMessage()
    ]


def _load(path: Path) -> None:
    with native.open_native(
        path, n_ctx=256, n_batch=64, n_seq_max=1, n_threads=2, flash_attn=True
    ) as context:
        assert context.n_vocab > 0


def test_the_build_here_has_no_amx_kernels_since_the_install_leaves_them_out() -> None:
    assert not native.amx_in_build(), f"installed without the README's CMAKE_ARGS: {native.REBUILD}"


def test_the_build_here_has_no_llamafile_sgemm_since_the_install_leaves_it_out() -> None:
    assert not native.llamafile_in_build(), (
        f"installed without the README's CMAKE_ARGS: {native.REBUILD}"
    )
    assert "-DGGML_LLAMAFILE=OFF" in native.BUILD_CMAKE_ARGS
    assert native.built_as_installed()  # what .ci/run asks before it rebuilds


def test_a_build_with_either_amx_or_the_sgemm_is_not_built_as_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for amx, sgemm in ((True, False), (False, True)):
        monkeypatch.setattr(native, "amx_in_build", lambda amx=amx: amx)
        monkeypatch.setattr(native, "llamafile_in_build", lambda sgemm=sgemm: sgemm)
        assert not native.built_as_installed()
        assert native.build_facts() == {"extra_buffers": not amx, "llamafile": sgemm}


def test_the_readme_and_ci_build_llama_cpp_python_with_the_engine_s_cmake_args() -> None:
    root = Path(__file__).resolve().parent.parent
    quoted = f'CMAKE_ARGS="{native.BUILD_CMAKE_ARGS}"'
    assert quoted in (root / "README.md").read_text()
    assert quoted in (root / ".ci" / "run").read_text()


def test_an_amx_build_loads_models_without_extra_buffers_and_says_once_how_to_rebuild(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger=LLAMA_LOG)
    _load(qwen_gguf)
    assert _extra_buffers(caplog), "Q4_0 weights are repacked on x86 where nothing says not to"
    caplog.clear()

    monkeypatch.setattr(native, "amx_in_build", lambda: True)
    monkeypatch.setattr(native, "_amx_told", threading.Event())
    _load(qwen_gguf)
    _load(qwen_gguf)

    assert _extra_buffers(caplog) == []
    warnings = [r.getMessage() for r in caplog.records if r.name == native.__name__]
    assert len(warnings) == 1
    assert "AMX kernels" in warnings[0] and native.REBUILD in warnings[0]


def test_the_stock_peers_refuse_a_build_with_amx_kernels_naming_the_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peer_module, "amx_in_build", lambda: True)
    model = tmp_path / "model.gguf"

    with pytest.raises(BenchError, match="AMX kernels") as in_process:
        with LlamaCppPythonPeer.open(model, n_ctx=512, n_threads=2):
            pass
    assert native.REBUILD in str(in_process.value)

    with pytest.raises(BenchError, match="--peer llama_cpp_server would load"):
        PEERS["llama_cpp_server"].build(Launch(model, 2, 2048, "q8_0-k"))
