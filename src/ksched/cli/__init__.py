"""The ksched command."""
