"""Translations at the upstream edge: another backend API in, ordinary chat chunks out."""
