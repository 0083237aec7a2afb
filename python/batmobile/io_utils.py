"""Version-tolerant torch.load (weights_only appeared in torch 1.13 and became the default in 2.6)."""
import torch


def load_checkpoint(path: str, map_location="cpu"):
    try:
        return torch.load(path, map_location=map_location, weights_only=False)
    except TypeError:  # torch without the weights_only argument
        return torch.load(path, map_location=map_location)
