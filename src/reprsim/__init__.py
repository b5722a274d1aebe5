"""reprsim: in what sense do differently trained language models learn similar representations?"""

__version__ = "0.1.0"
