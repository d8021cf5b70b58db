"""The core: base models (loading, generation), activation harvest and cache, probe artifacts and
their forward pass, training recipes, and which probes apply to which tasks. Imports the metrics and
the data layers only."""
