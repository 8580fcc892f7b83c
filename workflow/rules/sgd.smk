# Stage 7: distributed SGD of the PAP paper's CNN (config key `sgd:`), trained for real with
# the harness's allreduce algorithms, and its Table 5 (harness/dnn/sgd.py).

# what `rule all` asks for: nothing while the config has no `sgd:` experiment
SGD_OUTPUTS = []
