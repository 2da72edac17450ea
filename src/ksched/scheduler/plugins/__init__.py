"""In-tree plugins, one module per upstream plugin, with upstream's names."""
