"""The output unit's tanh and sigmoid activation functions (ACTIVATION function 3 and 4) on a
16-bit OFM: TensorFlow Lite's int16 reference algorithm, a 256-entry table of sigmoid in 0.16
fixed point with linear interpolation, applied to the scaled value.

The scaled value is the function's input in units of 1/(3 * 4096) (so +-2**17 is about
+-10.7): Vela programs the OFM scale to that unit for every operation it fuses tanh or sigmoid
into (``register_command_stream_generator``: pooling rescales the IFM scale by 0x3000,
elementwise ADD/SUB/MUL take an output scale of 1/0x3000), with the same power-of-two special
cases TFLite Micro's kernels prepare. Which function the hardware evaluates on that input is
inferred (rfcs/0007 section 7, rule 11): TFLite's, the only one that makes every Vela release's
LSTM streams bit-exact with TFLite Micro."""
from __future__ import annotations

import numpy as np

TANH, SIGMOID = 3, 4

#: sigmoid(i / 24) in unsigned 0.16 fixed point (i = 0..255, the last entry saturated to
#: 0xFFFF), the table TensorFlow Lite's int16 TANH / LOGISTIC reference kernels interpolate
#: (``sigmoid_table_uint16``, Apache License 2.0); these values are data the result depends
#: on bit for bit, not a formula: they differ from round(65536 * sigmoid(i / 24)) by one in
#: 44 places
SIGMOID_TABLE = np.array([
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149, 40794,
    41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369, 47911, 48443,
    48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169, 53581, 53983, 54374,
    54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433, 57724, 58007, 58280, 58544,
    58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370, 60565, 60753, 60935, 61110, 61279,
    61441, 61599, 61750, 61896, 62036, 62172, 62302, 62428, 62549, 62666, 62778, 62886, 62990,
    63090, 63186, 63279, 63368, 63454, 63536, 63615, 63691, 63765, 63835, 63903, 63968, 64030,
    64090, 64148, 64204, 64257, 64308, 64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652,
    64687, 64721, 64754, 64786, 64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019,
    65039, 65060, 65079, 65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234,
    65246, 65258, 65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360,
    65367, 65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474, 65476,
    65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498, 65500, 65501,
    65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513, 65514, 65515, 65516,
    65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522, 65523, 65523, 65524, 65524,
    65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528, 65528, 65528, 65529, 65529, 65529,
    65529, 65530, 65530, 65530, 65530, 65531, 65531, 65531, 65531, 65531, 65532, 65532, 65532,
    65532, 65532, 65532, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65533, 65534, 65534,
    65534, 65534, 65534, 65534, 65534, 65534, 65534, 65534, 65535,
], np.int64)


def _interpolate(magnitude: np.ndarray, frac_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(table value interpolated at ``magnitude / 2**frac_bits``, scaled by 2**frac_bits;
    mask of the magnitudes past the table's last interval, which saturate)."""
    index = magnitude >> frac_bits
    saturated = index >= len(SIGMOID_TABLE) - 1
    index = np.minimum(index, len(SIGMOID_TABLE) - 2)
    low, high = SIGMOID_TABLE[index], SIGMOID_TABLE[index + 1]
    frac = magnitude & ((1 << frac_bits) - 1)
    return (low << frac_bits) + frac * (high - low), saturated


def tanh16(x: np.ndarray) -> np.ndarray:
    """tanh of ``x / 12288`` in signed 0.15 fixed point: tanh(x) = 2 sigmoid(2x) - 1, so the
    table is read at |x| / 256 (the doubled argument) and the result recentred around 0."""
    x = np.asarray(x, np.int64)
    value, saturated = _interpolate(np.abs(x), 8)
    value = np.where(saturated, 0xFFFF << 8, value)
    centred = np.where(x >= 0, value - (1 << 23) + (1 << 7),
                       (1 << 23) + (1 << 7) - 1 - value)
    return centred >> 8


def sigmoid16(x: np.ndarray) -> np.ndarray:
    """sigmoid of ``x / 12288`` in signed 0.15 fixed point (0..32767): the table at |x| / 512,
    mirrored as 1 - sigmoid(|x|) for a negative ``x``."""
    x = np.asarray(x, np.int64)
    value, saturated = _interpolate(np.abs(x), 9)
    value = np.where(saturated, 0x7FFF << 10, value)
    mirrored = np.where(x >= 0, value + (1 << 9), (1 << 25) + (1 << 9) - 1 - value)
    return mirrored >> 10


def apply(func: int, x: np.ndarray) -> np.ndarray:
    """ACTIVATION function ``func`` (TANH or SIGMOID) on scaled values ``x``."""
    return tanh16(x) if func == TANH else sigmoid16(x)
