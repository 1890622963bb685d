"""Support code shared by every chapter: building, timing, testing and exercises."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
