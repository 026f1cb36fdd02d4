"""``ember.data``: datasets, samplers and the DataLoader."""
