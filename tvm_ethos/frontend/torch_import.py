"""PyTorch (``torch.export``) -> Relax through TVM's importer."""
from __future__ import annotations

import sys

from tvm_ethos.errors import ModelLoadError, UnsupportedModelError
from tvm_ethos.frontend.messages import one_line
from tvm_ethos.frontend.relax_module import finish


def is_torch_object(obj) -> bool:
    """A torch ``nn.Module`` or ``ExportedProgram`` (without importing torch: a program that
    holds one has imported it already)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    return isinstance(obj, (torch.nn.Module, torch.export.ExportedProgram))


def import_torch(obj, name: str):
    """``obj``: a saved ``torch.export`` program's bytes, an ``ExportedProgram``, or a
    ``(torch.nn.Module, example_inputs)`` pair to export; ``name`` labels every error."""
    try:
        import torch
    except ImportError:
        raise UnsupportedModelError(
            f"{name}: PyTorch import needs the optional 'torch' package "
            "(pip install 'tvm-ethos[torch]', which pins torch==2.13.0)"
        ) from None
    from tvm.relax.frontend.torch import from_exported_program

    try:
        if isinstance(obj, (bytes, bytearray)):
            import io

            prog = torch.export.load(io.BytesIO(bytes(obj)))
        elif isinstance(obj, tuple):
            module, example = obj
            if isinstance(module, torch.export.ExportedProgram):
                prog = module
            elif not isinstance(module, torch.nn.Module):
                raise ModelLoadError(f"{name}: example_inputs go with a torch.nn.Module, not a "
                                     f"{type(module).__name__}")
            else:
                if isinstance(example, torch.Tensor):
                    example = (example,)
                prog = torch.export.export(module.eval(), tuple(example))
        elif isinstance(obj, torch.nn.Module):
            raise ModelLoadError(f"{name}: a torch.nn.Module needs example_inputs "
                                 "(load_model(module, example_inputs=(x,))) to be exported")
        else:
            prog = obj
    except ModelLoadError:
        raise
    except Exception as err:
        raise ModelLoadError(f"{name}: cannot load a torch.export program: {one_line(err)}") \
            from None
    try:
        mod = from_exported_program(prog)
    except Exception as err:
        raise UnsupportedModelError(
            f"{name}: the PyTorch importer cannot convert this program: {one_line(err)}"
        ) from None
    return finish(mod).with_attr("tvm_ethos.source_format", "torch")
