"""Target lists: ``"ethos-n,opencl"``, ``"ethos-u -accelerator_config=ethos-u65-256,llvm"``,
``"llvm"``.

A target string is a comma-separated priority list of backend ids (as tvmc had it): each
operator goes to the first target that accepts it; the last target must be a host target
(llvm, opencl or tflite-micro), which takes everything. ``ethos-u`` alone is
``ethos-u,tflite-micro``: a .tflite whose Ethos-U operators run on the NPU and every other
operator stays a TFLite operator for TFLite Micro (the one host that needs no choosing: the
ethos-u operator is TFLite Micro's own). Per-target options are written inline
(``name -key=value``) or passed as keyword arguments to ``compile`` / ``partition``; every option
is validated against the backend's schema up front.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tvm_ethos.backends.registry import get_registry
from tvm_ethos.errors import OptionError, TargetError

ETHOS_U = "ethos-u"
#: the host ``ethos-u`` alone gets
TFLITE_MICRO = "tflite-micro"


@dataclass
class TargetSpec:
    backend_id: str
    options: dict = field(default_factory=dict)

    def __str__(self):
        # an empty option (llvm's -mcpu, opencl's -cpu_ops: "none given") is left out
        opts = "".join(f" -{k}={v}" for k, v in sorted(self.options.items()) if v != "")
        return f"{self.backend_id}{opts}"


@dataclass
class TargetList:
    targets: list[TargetSpec]

    @property
    def host(self) -> TargetSpec:
        return self.targets[-1]

    @property
    def accelerators(self) -> list[TargetSpec]:
        return self.targets[:-1]

    @property
    def ids(self) -> list[str]:
        return [t.backend_id for t in self.targets]

    def options_of(self, backend_id: str) -> dict:
        for t in self.targets:
            if t.backend_id == backend_id:
                return t.options
        return {}

    def __str__(self):
        return ",".join(str(t) for t in self.targets)


def _convert(value: str):
    low = value.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def _coerce(target: str, key: str, value, spec):
    """The option's value with its default's type: text (a CLI's, or ``-key=value`` in a target
    string) is read as inline options are; otherwise ``True`` is no ``tops`` (though
    ``True == 1``) and ``2.0`` no ``ple_ratio``."""
    default = spec.default
    if default is None:
        return value
    want = bool if isinstance(default, bool) else int if isinstance(default, int) else \
        float if isinstance(default, float) else str if isinstance(default, str) else None
    if want is None:
        return value
    if isinstance(value, str) and want is not str:
        value = _convert(value)
    ok = isinstance(value, want) and (want is bool or not isinstance(value, bool))
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        allowed = (f"allowed values: {', '.join(map(str, spec.allowed))}" if spec.allowed
                   else spec.help or f"a {want.__name__}")
        raise OptionError(f"option {key!r} of target {target!r}: bad value {value!r} "
                          f"({type(value).__name__}, expected {want.__name__}); {allowed}")
    return value


def parse_targets(target, options: dict | None = None, registry=None) -> TargetList:
    """Parse and validate a target list; ``options`` are routed to the target that declares them."""
    registry = registry or get_registry()
    if isinstance(target, TargetList):
        specs = [TargetSpec(t.backend_id, dict(t.options)) for t in target.targets]
    else:
        if isinstance(target, (list, tuple)):
            parts = [str(p) for p in target]
        elif isinstance(target, str):
            parts = target.split(",")
        else:
            raise TargetError(
                f"target must be a string such as 'ethos-n,llvm', not {type(target).__name__}"
            )
        specs = []
        for raw in parts:
            tokens = raw.split()
            if not tokens:
                raise TargetError(f"empty target name in {target!r}")
            name, opts = tokens[0], {}
            for tok in tokens[1:]:
                if not tok.startswith("-") or "=" not in tok:
                    raise TargetError(
                        f"target {name!r}: cannot read option {tok!r}; write -key=value"
                    )
                key, _, val = tok.lstrip("-").partition("=")
                opts[key.replace("-", "_")] = _convert(val)
            specs.append(TargetSpec(name, opts))
    seen = set()
    for spec in specs:
        if not registry.is_registered(spec.backend_id):
            raise TargetError(
                f"unknown target {spec.backend_id!r}; known targets: "
                f"{', '.join(sorted(registry.ids()))}"
            )
        if spec.backend_id in seen:
            raise TargetError(f"target {spec.backend_id!r} appears twice in {target!r}")
        seen.add(spec.backend_id)
    if [s.backend_id for s in specs] == [ETHOS_U] and registry.is_registered(TFLITE_MICRO):
        specs.append(TargetSpec(TFLITE_MICRO))
    backends = [registry.get(s.backend_id) for s in specs]
    hosts = [b.backend_id for b in backends if b.capabilities().is_host]
    if not backends[-1].capabilities().is_host:
        host_names = sorted(b for b in registry.ids() if registry.get(b).capabilities().is_host)
        raise TargetError(
            f"target list {target!r} has no host target at the end: the last target must be one of "
            f"{', '.join(host_names)} (it runs what the accelerators reject), e.g. "
            f"'{','.join(s.backend_id for s in specs)},llvm'"
        )
    if len(hosts) > 1:
        raise TargetError(
            f"target list {target!r} has more than one host target ({', '.join(hosts)}); only the "
            "last entry may be a host"
        )
    # route keyword options
    for key, value in (options or {}).items():
        owners = [s for s, b in zip(specs, backends) if key in b.options_schema()]
        if not owners:
            allowed = {s.backend_id: sorted(b.options_schema()) for s, b in zip(specs, backends)}
            listing = "; ".join(f"{k}: {', '.join(v) or '(none)'}" for k, v in allowed.items())
            raise OptionError(
                f"unknown option {key!r} for targets {', '.join(s.backend_id for s in specs)}; "
                f"allowed options: {listing}"
            )
        for s in owners:
            if key in s.options and s.options[key] != (
                    _convert(value) if isinstance(value, str) else value):
                raise OptionError(
                    f"option {key!r} of target {s.backend_id!r} is given twice: "
                    f"-{key}={s.options[key]} in the target string and {key}={value!r}")
            s.options[key] = value
    # validate and fill defaults
    for spec, backend in zip(specs, backends):
        schema = backend.options_schema()
        for key, value in list(spec.options.items()):
            if key not in schema:
                raise OptionError(
                    f"unknown option {key!r} for target {spec.backend_id!r}; allowed options: "
                    f"{', '.join(sorted(schema)) or '(none)'}"
                )
            value = spec.options[key] = _coerce(spec.backend_id, key, value, schema[key])
            schema[key].check(spec.backend_id, key, value)
        for key, opt in schema.items():
            spec.options.setdefault(key, opt.default)
    return TargetList(specs)
