"""Data in: the shared evaluation datasets, WikiText-2, user files, and sentence splitting."""
