"""Frontends that build simulator graphs from models made elsewhere (PopART's role): ONNX."""
