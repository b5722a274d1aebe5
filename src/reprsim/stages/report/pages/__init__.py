"""The report's pages, one module each (templates/<page>.html): the section functions of that page."""
