"""Gettext catalogues (.po, .pot) filled by a translation model: formats, plural forms, accelerators."""
