"""Adapters to other training frameworks that need none of them installed (verl)."""
