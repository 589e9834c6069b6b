"""Move what ``llama_job.sh`` needs to a lent machine (no network, a limited upload per call): Gemma 3 270M served by
llama-cpp-python on that machine's CPU cores, evaluated through EffiRAG's OpenAI backend.

A developer tool beside ``gemma_kit.py`` (whose packing, checking and index/MiniLM helpers it reuses). ``build``
(here) packs into groups ``KIT/g1`` … ``KIT/gN`` of at most ``--group-mib`` MiB:

- the Q4_K_M GGUF itself, split across groups (SHA-256 of every part, and of the whole file on reassembly);
- llama-cpp-python as installed here (``llama_cpp`` + its dist-info, pure Python calling llama.cpp's shared libraries
  by ctypes, built for AVX2 and needing glibc ≥ 2.34), as a tarball, with this host's ``libgomp.so.1`` put in its
  ``lib/`` only where the machine's loader cannot find one;
- wheels (cp312, manylinux x86_64) of the server's dependencies and of what the retrieval path lacks there;
- Gemma's tokenizer (the HF files: token counts the same as the HF backend's), the MiniLM query encoder, the PopQA and
  MuSiQue-slice questions and their BM25 + dense indexes (as in ``gemma_kit.py``).

    python benchmarks/device/llama_kit.py build --popqa-index DIR --musique-index DIR [--out .dev/llama]
    python3 benchmarks/device/llama_kit.py unpack --kit /tmp/lkit --kit .dev/llama --to /tmp/lk --site /tmp/lsite
"""

from __future__ import annotations

import argparse
import ctypes
import gzip
import hashlib
import json
import lzma
import re
import shutil
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gemma_kit as gk

GGUF_NAME = gk.GGUF_NAME
# The server's imports (``import llama_cpp.server.app``, uvicorn serving) and the job's retrieval + tokenizer path,
# at this environment's versions; numpy, torch and sentence-transformers come with the machine's image.
WHEELS = (
    "transformers", "tokenizers", "regex", "bm25s", "faiss-cpu", "fastapi", "starlette", "pydantic", "pydantic_core",
    "uvicorn", "annotated-types", "typing-inspection", "opentelemetry-api", "typing_extensions", "annotated-doc",
    "anyio", "click", "diskcache", "pydantic-settings", "python-dotenv", "sniffio", "sse-starlette",
    "starlette-context", "h11", "Jinja2", "MarkupSafe",
)  # fmt: skip
LIBGOMP = Path("/lib/x86_64-linux-gnu/libgomp.so.1")


def llama_tar(dst: Path) -> Path:
    """``llama_cpp`` and its dist-info as tar.gz; pip installed ``lib/libX.so.0`` and ``lib/libX.so.0.25.3`` as copies
    of ``lib/libX.so``, the tarball has them as links to it (the libraries find each other by ``libX.so.0``)."""
    import llama_cpp

    pkg = Path(llama_cpp.__file__).parent
    info = next(pkg.parent.glob("llama_cpp_python-*.dist-info"))

    def member(t: tarfile.TarInfo) -> tarfile.TarInfo | None:
        if "__pycache__" in t.name:
            return None
        base = re.sub(r"\.so\.[0-9.]+$", ".so", t.name)
        if t.isfile() and base != t.name and (pkg.parent / base).read_bytes() == (pkg.parent / t.name).read_bytes():
            t.type, t.linkname, t.size = tarfile.SYMTYPE, Path(base).name, 0
        return t

    if not dst.is_file():
        with tarfile.open(dst, "w:gz") as tar:
            for root in (pkg, info):
                tar.add(root, arcname=root.name, filter=member)
    return dst


def xz(src: Path, dst: Path) -> Path:
    if not dst.is_file():
        dst.with_suffix(".tmp").write_bytes(lzma.compress(src.read_bytes(), preset=9))
        dst.with_suffix(".tmp").replace(dst)
    return dst


def collect(args: argparse.Namespace, cache: Path) -> dict[str, Path]:
    """Kit path → local file of everything but the GGUF."""
    from transformers import AutoTokenizer

    cache.mkdir(parents=True, exist_ok=True)
    files: dict[str, Path] = {f"wheels/{w.name}": w for w in gk.download_wheels(cache / "wheels", WHEELS)}
    files |= gk.minilm_fp16(cache)
    files["minilm/model.fp16.safetensors.gz"] = gk.gz(files.pop("minilm/model.fp16.safetensors"), cache / "minilm.gz")
    files["llama/llama_cpp.tar.gz"] = llama_tar(cache / "llama_cpp.tar.gz")
    files["llama/libgomp.so.1"] = LIBGOMP.resolve()
    files["gemma/tokenizer.json.xz"] = xz(args.model / "tokenizer.json", cache / "tokenizer.json.xz")
    files |= {f"gemma/{n}": args.model / n for n in gk.HF_FILES}
    for name, index in zip(gk.DATASETS, (args.popqa_index, args.musique_index), strict=True):
        questions = args.data / name / "questions.json"
        files[f"data/{name}.questions.json.gz"] = gk.gz(questions, cache / f"{name}.q.json.gz")
        files[f"index/{name}.tar.gz"] = gk.index_tar(index, cache / f"{name}.index.tar.gz")
    ids = AutoTokenizer.from_pretrained(str(args.model)).encode(gk.CHECK_TEXT)
    gguf = args.model / "gguf" / GGUF_NAME
    check = {"text": gk.CHECK_TEXT, "ids": ids, "gguf_sha256": gk.sha256(gguf), "gguf_bytes": gguf.stat().st_size}
    (cache / "check.json").write_text(json.dumps(check))
    files["gemma/check.json"] = cache / "check.json"
    return files


def build(args: argparse.Namespace) -> None:
    files = collect(args, args.out / "cache")
    gk.write_groups(args.out, gk.pack(files, args.model / "gguf" / GGUF_NAME, int(args.group_mib * gk.MiB)))


def unpack(args: argparse.Namespace) -> None:
    where = gk.verified([Path(k) for k in args.kit])
    to: Path = args.to
    site: Path = args.site
    check = json.loads(where["gemma/check.json"].read_text())
    _gguf(where, check, to / GGUF_NAME)
    site.mkdir(parents=True, exist_ok=True)
    with tarfile.open(where["llama/llama_cpp.tar.gz"]) as tar:
        tar.extractall(site, filter="tar")  # "tar", not "data": the library links point inside lib/
    try:
        ctypes.CDLL("libgomp.so.1")
    except OSError:  # the machine has no OpenMP runtime: llama.cpp's libraries find this one by RUNPATH $ORIGIN
        shutil.copyfile(where["llama/libgomp.so.1"], site / "llama_cpp" / "lib" / "libgomp.so.1")
    fp16 = to / "minilm.fp16.safetensors"
    with gzip.open(where.pop("minilm/model.fp16.safetensors.gz")) as fi:
        fp16.write_bytes(fi.read())
    gk._minilm(where | {"minilm/model.fp16.safetensors": fp16}, site)
    for name in gk.DATASETS:
        (to / "data" / name).mkdir(parents=True, exist_ok=True)
        with gzip.open(where[f"data/{name}.questions.json.gz"]) as fi:
            (to / "data" / name / "questions.json").write_bytes(fi.read())
    for key in (k for k in where if k.startswith("index/")):
        gk._index(where[key], to / "index" / key.removeprefix("index/").removesuffix(".tar.gz"))
    _tokenizer(where, check, to / "tokenizer")
    print(f"unpacked to {to} (GGUF {to / GGUF_NAME}, tokenizer {to / 'tokenizer'}), packages to {site}")


def _gguf(where: dict[str, Path], check: dict[str, object], dst: Path) -> None:
    """The GGUF from its parts, checked against the whole file's SHA-256."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    with dst.open("wb") as fo:
        for key in sorted(k for k in where if k.startswith("tensors/part")):
            data = where[key].read_bytes()
            h.update(data)
            fo.write(data)
    if h.hexdigest() != check["gguf_sha256"] or dst.stat().st_size != check["gguf_bytes"]:
        raise SystemExit(f"{dst}: reassembled GGUF differs from the CPU's (SHA-256 or size): a part missing?")


def _tokenizer(where: dict[str, Path], check: dict[str, object], dst: Path) -> None:
    from transformers import AutoTokenizer

    dst.mkdir(parents=True, exist_ok=True)
    (dst / "tokenizer.json").write_bytes(lzma.decompress(where["gemma/tokenizer.json.xz"].read_bytes()))
    for name in gk.HF_FILES:
        shutil.copyfile(where[f"gemma/{name}"], dst / name)
    ids = AutoTokenizer.from_pretrained(str(dst)).encode(str(check["text"]))
    if ids != check["ids"]:
        raise SystemExit(f"tokenizer ids differ from the CPU's: {ids} vs {check['ids']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", type=Path, default=Path(".dev/llama"))
    b.add_argument("--group-mib", type=float, default=56.0)
    b.add_argument("--model", type=Path, default=Path.home() / ".cache/effirag/models/gemma-3-270m")
    b.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "data")
    b.add_argument("--popqa-index", type=Path, required=True)
    b.add_argument("--musique-index", type=Path, required=True)
    u = sub.add_parser("unpack")
    u.add_argument("--kit", action="append", required=True, help="a folder holding g1 … gN (repeatable)")
    u.add_argument("--to", type=Path, default=Path("/tmp/lk"))
    u.add_argument("--site", type=Path, default=Path("/tmp/lsite"))
    args = ap.parse_args()
    build(args) if args.cmd == "build" else unpack(args)


if __name__ == "__main__":
    main()
