from c3.cli import main

main()
