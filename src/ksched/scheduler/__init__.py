"""The scheduling framework, cache, queue, plugins and loop."""
