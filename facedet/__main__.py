"""``python -m facedet``: the same command line as the ``facedet`` script."""
from .cli import main

main()
