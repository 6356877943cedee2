"""The AWS EC2 reference provider: a v2 provider script on boto3, ``provisioner-ec2``.

It runs as a separate executable that speaks the script contract
(docs/script-contract.md) and imports nothing of the daemon: the daemon may
change inside without the provider noticing, and an operator can run the
provider by hand to see what the daemon would see.

Each action is a plain function of (settings, clients, input document) that
returns the output document (``actions.ACTIONS``), so a long-running server
can call the same functions later without the process around them.
The modules:

- ``settings``: the settings file named by ``EC2_PROVIDER_CONFIG``, checked key by key
- ``inputs``: the input documents of each action, checked field by field
- ``fields``: how a validation error names the place it is about
- ``errors``: exit codes, and how AWS errors map onto them (without secrets)
- ``clients``: the boto3 client, its time limits and its retries
- ``request_ids``: what a requestId holds, so ``status`` can find its instances
- ``instances``: EC2 instances as the contract shows them
- ``node_names``: how a host made for a scheduler's named node learns its name (user data)
- ``describe``, ``launch``, ``terminate``, ``inventory``: the actions
- ``main``: the command line
"""
