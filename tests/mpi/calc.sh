# calc EXPR: arithmetic on decimal seconds for the MPI test scripts, through awk
# (POSIX, on every machine) rather than bc (absent from many images, GPU ones too).
# A comparison prints 1 or 0, as bc does.
calc() { awk "BEGIN { print ($*) }"; }
