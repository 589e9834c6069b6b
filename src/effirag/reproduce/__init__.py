"""``effirag reproduce``: the five papers' headline claims, measured in miniature with significance, in one command.

Layers: above ``train`` and ``eval`` (it runs their commands and reads their outputs), below ``cli``."""
