import torch
import torch.nn as nn

# A stacked LSTM sequence model: input projection, a multi-layer LSTM over the whole
# sequence, and a classifier on the last time step's hidden state. Initial states are zeros.
BATCH = 64
SEQ_LEN = 256
INPUT_SIZE = 256
HIDDEN_SIZE = 768
NUM_LAYERS = 3
NUM_CLASSES = 128


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, num_classes):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=num_layers, batch_first=True)
        self.fc = nn.Linear(hidden_size, num_classes)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(out[:, -1, :])


def get_inputs():
    return [torch.randn(BATCH, SEQ_LEN, INPUT_SIZE)]


def get_init_inputs():
    return [INPUT_SIZE, HIDDEN_SIZE, NUM_LAYERS, NUM_CLASSES]
