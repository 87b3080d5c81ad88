from fwbench.cli.app import main

main()
