"""Op vocabulary shared by the analyzers: which names are heavy ops, light ops or incidental.

Families are what operator coverage is measured over: conv, gemm, attention, norm, softmax,
rnn, scan. A name is the last component of a call (``F.conv2d`` -> ``conv2d``, ``at::mm`` ->
``mm``, ``nn.Linear`` -> ``Linear``).

>>> family("conv2d"), family("Linear"), family("scaled_dot_product_attention"), family("relu")
('conv', 'gemm', 'attention', None)
>>> is_incidental("view"), is_incidental("matmul")
(True, False)
"""

from __future__ import annotations

HEAVY_FAMILIES = ("conv", "gemm", "attention", "norm", "softmax", "rnn", "scan")

_FAMILY: dict[str, str] = {}
for _fam, _names in {
    "conv": "conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d convolution "
            "_convolution cudnn_convolution Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d "
            "ConvTranspose3d conv_depthwise2d mkldnn_convolution",
    "gemm": "linear matmul mm bmm addmm addmv mv baddbmm addbmm einsum tensordot dot Linear "
            "Bilinear bilinear chain_matmul _addmm_activation LazyLinear",
    "attention": "scaled_dot_product_attention MultiheadAttention multi_head_attention_forward "
                 "_scaled_dot_product_attention _scaled_dot_product_flash_attention "
                 "_scaled_dot_product_efficient_attention Transformer TransformerEncoderLayer "
                 "TransformerDecoderLayer TransformerEncoder",
    "norm": "layer_norm batch_norm group_norm instance_norm rms_norm local_response_norm "
            "native_layer_norm native_batch_norm cudnn_batch_norm LayerNorm BatchNorm1d "
            "BatchNorm2d BatchNorm3d GroupNorm InstanceNorm1d InstanceNorm2d InstanceNorm3d "
            "RMSNorm LocalResponseNorm normalize",
    "softmax": "softmax log_softmax _softmax _log_softmax Softmax LogSoftmax Softmax2d softmin",
    "rnn": "lstm gru rnn_tanh rnn_relu lstm_cell gru_cell rnn_tanh_cell LSTM GRU RNN LSTMCell "
           "GRUCell RNNCell _thnn_fused_lstm_cell",
    "scan": "cumsum cumprod cummax cummin logcumsumexp associative_scan",
}.items():
    for _n in _names.split():
        _FAMILY[_n] = _fam

# Torch compute that is not heavy (elementwise, pooling, reductions, activations).
LIGHT = set(
    "relu relu_ gelu silu tanh sigmoid elu selu leaky_relu hardtanh hardswish mish softplus "
    "add sub mul div pow exp log sqrt rsqrt abs neg clamp clamp_ maximum minimum where "
    "sum mean max min amax amin var std norm prod argmax argmin topk sort "
    "max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d "
    "adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool2d interpolate upsample pad "
    "dropout embedding pixel_shuffle channel_shuffle one_hot erf tril triu masked_fill "
    "ReLU GELU SiLU Tanh Sigmoid ELU LeakyReLU Hardswish Hardtanh ReLU6 relu6 Dropout "
    "MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d "
    "AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool2d Embedding Upsample Identity Flatten "
    "add_ mul_ sub_ div_ addcmul addcdiv lerp outer cross baddbmm_".split()
)

# Never compute: allocation, shape, layout, dtype/device plumbing, parameter access.
INCIDENTAL = set(
    "view view_as reshape reshape_as permute transpose t contiguous flatten unflatten squeeze "
    "unsqueeze expand expand_as size sizes shape stride strides numel dim ndimension dtype device "
    "is_cuda is_contiguous data_ptr const_data_ptr mutable_data_ptr options to cuda cpu float "
    "double type type_as item tolist empty empty_like empty_strided zeros zeros_like ones "
    "ones_like full full_like new_empty new_zeros new_ones new_full arange tensor from_blob "
    "as_strided narrow select chunk split unbind cat stack clone detach requires_grad_ "
    "Parameter parameters named_parameters buffers register_buffer register_parameter "
    "TensorOptions device_of scalar_type element_size storage_offset is_floating_point "
    "fill_ zero_ copy_ resize_ index_select gather scatter repeat tile movedim "
    "Tensor Scalar IntArrayRef ScalarType manual_seed no_grad inference_mode "
    "getCurrentCUDAStream current_stream CUDAGuard OptionalCUDAGuard set_device is_available "
    "get_device cuda_stream current_device".split()
)


def family(name: str) -> str | None:
    """Heavy-op family of a call's last name component, or None."""
    return _FAMILY.get(name.split("::")[-1].split(".")[-1])


def is_incidental(name: str) -> bool:
    return name.split("::")[-1].split(".")[-1] in INCIDENTAL


def is_light(name: str) -> bool:
    return name.split("::")[-1].split(".")[-1] in LIGHT


# Kernel names as profiled (cuBLAS, cuDNN, ATen native kernels) -> family.
_KERNEL_HINTS = (
    ("attention", ("flash", "fmha", "attention", "sdpa", "mha")),
    ("conv", ("conv", "implicit_gemm", "winograd", "fprop", "dgrad", "wgrad", "cudnn")),
    ("gemm", ("gemm", "matmul", "sgemm", "hgemm", "cutlass", "xmma", "ampere_", "sm90_", "sm80_",
              "cublas", "gemv", "mm_", "linear")),
    ("norm", ("layer_norm", "layernorm", "batch_norm", "batchnorm", "bn_fw", "group_norm",
              "rms_norm", "rmsnorm", "instance_norm", "welford")),
    ("softmax", ("softmax",)),
    ("rnn", ("lstm", "gru", "rnn")),
    ("scan", ("scan", "cumsum", "cumprod")),
)


def kernel_family(kernel_name: str) -> str | None:
    """Heavy-op family of a profiled kernel from its (mangled or demangled) name.

    >>> kernel_family("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32")
    'gemm'
    >>> kernel_family("void at::native::vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>")
    """
    low = kernel_name.lower()
    for fam, hints in _KERNEL_HINTS:
        if any(h in low for h in hints):
            return fam
    return None


def families_in_name(name: str) -> set[str]:
    """Families a custom kernel's own name claims (``fused_gemm_bias_gelu`` -> {gemm}).

    >>> sorted(families_in_name("conv_bn_relu_kernel"))
    ['conv', 'norm']
    """
    low = name.lower()
    fams = {f for f, hints in _KERNEL_HINTS if any(h in low for h in hints)}
    for fam, words in (("gemm", ("mm", "gemm", "linear", "fc", "dense", "matmul")),
                       ("norm", ("bn", "ln", "norm")), ("conv", ("conv",)),
                       ("attention", ("attn", "attention")), ("softmax", ("softmax",)),
                       ("rnn", ("lstm", "gru", "rnn", "cell")), ("scan", ("scan", "cumsum"))):
        parts = low.replace("-", "_").split("_")
        if any(w in parts for w in words):
            fams.add(fam)
    return fams
