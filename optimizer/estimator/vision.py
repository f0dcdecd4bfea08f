"""Image models: parameters, FLOPs and saved activations of ResNets and ViTs, from their layers.

Counted layer by layer, so a preset and its ``config.json`` agree and other image sizes follow:

* **ResNet** (He et al. 2016, arXiv 1512.03385; v1.5 as torchvision and NVIDIA's examples build it:
  the stride sits on the 3x3 convolution). Bottleneck blocks ``1x1 -> 3x3 -> 1x1`` with batch norm
  and ReLU after each convolution; a projection shortcut on each stage's first block. Checked
  against torchvision's ``resnet50``: 25,557,032 parameters, 4.09 GMACs at 224 px.
* **ViT** (Dosovitskiy et al. 2020, arXiv 2010.11929): a 16x16 patch embedding, a class token,
  learned positions and a pre-norm transformer encoder over ``(size/patch)^2 + 1`` tokens; its
  blocks are priced by the transformer formulas (``memory.layer_bytes_per_token``).

Saved activations (what autograd keeps for backward) of a ResNet, per convolution unit: the
convolution's output (batch norm's input) and, where a ReLU follows, batch norm's output, which the
in-place ReLU overwrites and the next convolution saves as its input; each block adds its residual
sum (after its in-place ReLU, the next block's input).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True, slots=True)
class ConvNetFigures:
    params: int
    forward_flops: float  # per image (2 x multiply-adds)
    saved_elements: float  # per image, kept for backward
    largest_map_elements: float  # the biggest single feature map (a backward working buffer)
    # FLOPs per image of the 3x3 stride-1 convolutions: the ones cuDNN can run as Winograd
    winograd_flops: float = 0.0
    # Input plus output elements per image summed over every convolution: what NCHW layout
    # transposes move (``throughput.nchw_transpose_bytes``)
    conv_io_elements: float = 0.0


def _conv(c_in: int, c_out: int, k: int) -> int:
    return c_in * c_out * k * k  # torchvision ResNets have no convolution biases


@lru_cache(maxsize=64)
def resnet_figures(
    depths: tuple[int, ...], image_size: int, stem_width: int = 64, widths: tuple[int, ...] = (64, 128, 256, 512),
    expansion: int = 4, num_classes: int = 1000,
) -> ConvNetFigures:
    """Bottleneck ResNet (v1.5) figures for ``image_size`` x ``image_size`` RGB input."""
    params = 0
    macs = 0.0
    saved = 0.0
    largest = 0.0
    winograd_macs = 0.0
    conv_io = 0.0

    def unit(c_in: int, c_out: int, k: int, hw_out: float, relu: bool = True, stride: int = 1,
             hw_in: float | None = None) -> None:
        nonlocal params, macs, saved, largest, winograd_macs, conv_io
        params += _conv(c_in, c_out, k) + 2 * c_out  # + batch-norm scale and shift
        macs += _conv(c_in, c_out, k) * hw_out
        conv_io += c_in * (hw_out if hw_in is None else hw_in) + c_out * hw_out
        if k == 3 and stride == 1:
            winograd_macs += _conv(c_in, c_out, k) * hw_out
        # Batch norm keeps its input (the conv output); the in-place ReLU keeps its output, which
        # the next convolution keeps as its input. A BN feeding the residual sum keeps nothing more.
        saved += (2 if relu else 1) * c_out * hw_out
        largest = max(largest, c_out * hw_out)

    side = image_size / 2  # stem: 7x7 stride 2, then 3x3 max-pool stride 2
    saved += 3 * image_size * image_size  # the input batch itself (the first conv saves it)
    unit(3, stem_width, 7, side * side, hw_in=float(image_size * image_size))
    side /= 2
    saved += stem_width * side * side  # max-pool output (and its indices, counted as one map)
    c_in = stem_width
    for stage, (depth, width) in enumerate(zip(depths, widths, strict=True)):
        for block in range(depth):
            stride = 2 if (stage > 0 and block == 0) else 1
            hw_in = side * side
            side_out = side / stride
            hw_out = side_out * side_out
            c_out = width * expansion
            unit(c_in, width, 1, hw_in)
            unit(width, width, 3, hw_out, stride=stride, hw_in=hw_in)
            unit(width, c_out, 1, hw_out, relu=False)
            if block == 0:
                unit(c_in, c_out, 1, hw_out, relu=False, hw_in=hw_in)  # projection shortcut
            saved += c_out * hw_out  # residual sum (ReLU in place after it)
            c_in = c_out
            side = side_out
    params += c_in * num_classes + num_classes  # global pool + fully connected head
    macs += c_in * num_classes
    saved += c_in  # pooled features
    return ConvNetFigures(params=params, forward_flops=2.0 * macs, saved_elements=saved, largest_map_elements=largest,
                          winograd_flops=2.0 * winograd_macs, conv_io_elements=conv_io)


def vit_params(layers: int, hidden: int, intermediate: int, patch: int, image_size: int, num_classes: int) -> int:
    """ViT with qkv biases, LayerNorm, a class token and a linear classification head."""
    tokens = (image_size // patch) ** 2 + 1
    block = 4 * hidden * hidden + 4 * hidden + 2 * hidden * intermediate + intermediate + hidden + 4 * hidden
    embed = 3 * patch * patch * hidden + hidden + hidden + tokens * hidden  # patch conv (+bias), cls, positions
    return layers * block + embed + 2 * hidden + hidden * num_classes + num_classes


def vit_tokens(image_size: int, patch: int) -> int:
    """Sequence length of a ViT: one token per patch plus the class token."""
    return (image_size // patch) ** 2 + 1
