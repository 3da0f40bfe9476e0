"""The network: a decoder (``lm``), its attention paths, position schemes and spans, and the
``ModelSpec`` it is built from. Imports torch and this package only."""
