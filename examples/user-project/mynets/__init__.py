"""This project's own Gluon networks (small ones, for 32x32 images)."""

from mynets.nets import MLP, TinyCNN

__all__ = ["MLP", "TinyCNN"]
