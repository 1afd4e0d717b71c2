// blockrnn — TensorFlow's fused RNN block ops, exactly, and fast. Umbrella header.
#pragma once

#include "blockrnn/context.h"
#include "blockrnn/error.h"
#include "blockrnn/gru.h"
#include "blockrnn/layer.h"
#include "blockrnn/lstm.h"
#include "blockrnn/matmul.h"
#include "blockrnn/model.h"
#include "blockrnn/ops.h"
#include "blockrnn/sequence.h"
#include "blockrnn/tensor.h"
#include "blockrnn/version.h"  // BLOCKRNN_VERSION_STRING, BLOCKRNN_VERSION_MAJOR, ...
