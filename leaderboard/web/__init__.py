"""The public and researcher pages: views, forms, plots and their URL modules."""
