"""What every evaluation of a fine-tuned model shares: its rows, tokenizer and classifier, and the
columns that say where and on what it was scored."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import torch

from reprsim.io.datasets import load_split, read_meta
from reprsim.io.device import describe
from reprsim.nets.classifiers import length_order
from reprsim.nets.loading import load_classifier, load_tokenizer


def evaluation_setup(model_dir: str | Path, dataset_dir: str | Path, split: str, device: torch.device):
    """The split's rows in order of token length (every score here is one of the set of rows, and
    sorted batches pad little), the tokenizer, the classifier (eval mode) and the max length it was
    tuned with."""
    max_length = int(read_meta(model_dir)["spec"]["max_length"])
    frame, tokenizer = load_split(dataset_dir, split), load_tokenizer(model_dir)
    frame = frame.iloc[length_order(tokenizer, frame, max_length)]
    return frame, tokenizer, load_classifier(model_dir, device), max_length


def tagged(rows: list[dict], split: str, frame: pd.DataFrame, model_dir: str | Path, device: torch.device
           ) -> pd.DataFrame:
    table = pd.DataFrame(rows)
    table["split"], table["n"], table["model"] = split, len(frame), Path(model_dir).name
    table["device"] = describe(device)  # where it ran: in a SLURM job, the GPU it was allocated or the CPU
    return table
