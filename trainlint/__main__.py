"""`python -m trainlint` runs the command line."""

from trainlint.launch import main

if __name__ == "__main__":
    main()
