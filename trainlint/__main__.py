"""`python -m trainlint` runs the command line."""

from trainlint.cli import main

if __name__ == "__main__":
    main()
