"""The core: base models (loading, hooks on their layers, generation), activation harvest and
cache, probe artifacts and their forward pass, training recipes, and which probes apply to which
tasks. Imports the metrics and the data layers only."""
