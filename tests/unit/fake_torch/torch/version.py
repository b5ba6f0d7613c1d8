cuda = "0.0"
