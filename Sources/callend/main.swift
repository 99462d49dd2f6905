import CallEndpoint

print("callend")
