"""The last step of every Ethos-U stream generator: its NPU operations to the driver payload
the ``ethos-u`` operator carries. Every generator (layer by layer, planned, LSTM, SVDF) ends
here, so each stream gets the same treatment: registers already holding a value are not
written again (``stream_compact``), BLOCKDEP waits after a backwards feature map
(``blockdep_guard``), Vela's shared-buffer layouts are worked out once per distinct
block (``shram_layouts``), and Vela's printed notes on its default configuration stay quiet."""
from __future__ import annotations

import contextlib
import io

from tvm_ethos.backends.ethos_u.blockdep_guard import register_command_stream
from tvm_ethos.backends.ethos_u.shram_layouts import remembered_layouts
from tvm_ethos.backends.ethos_u.stream_base import vela_api
from tvm_ethos.backends.ethos_u.stream_compact import reuse_unread_registers


def driver_payload(ops: list, accelerator) -> bytes:
    """The driver payload of ``ops`` (Vela's NpuOperations, changed in place by the
    compaction) for ``accelerator`` (Vela's ``NpuAccelerator``)."""
    api = vela_api()
    reuse_unread_registers(api, ops)
    with contextlib.redirect_stdout(io.StringIO()), remembered_layouts():
        words = register_command_stream(ops, accelerator)
        return api.npu_create_driver_payload(words, accelerator)
