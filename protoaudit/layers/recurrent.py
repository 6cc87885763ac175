"""Recurrent layers (RNN, LSTM, LSTMUnit)."""
