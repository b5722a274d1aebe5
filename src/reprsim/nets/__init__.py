"""Transformers models as the stages use them: loading models and tokenizers, classifier heads, batching, scores."""
