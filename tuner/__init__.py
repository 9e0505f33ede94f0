"""tune: find the fastest correct launch configuration of a speculative-decoding LLM server."""
__version__ = "0.1.0"
