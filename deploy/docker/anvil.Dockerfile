# syntax=docker/dockerfile:1
#
# anvil, the development EVM chain, from the same pinned npm package the tests use
# (tools/anvil: @foundry-rs/anvil 1.7.1, locked with integrity hashes). From the repository root:
#
#   docker build -f deploy/docker/anvil.Dockerfile -t opledger/anvil:1.7.1 .
#
# Development only: anvil's accounts are public keys funded from nothing.

FROM node:20-bookworm-slim
WORKDIR /opt/anvil
COPY tools/anvil/package.json tools/anvil/package-lock.json ./
# npm ci installs exactly the locked versions; the binary ships inside the platform package
# (@foundry-rs/anvil-linux-amd64 or -arm64, Debian's architecture names), so install scripts,
# which would download it instead, are not run.
RUN npm ci --ignore-scripts --no-audit --no-fund --update-notifier=false \
    && ln -s "/opt/anvil/node_modules/@foundry-rs/anvil-linux-$(dpkg --print-architecture)/bin/anvil" \
        /usr/local/bin/anvil \
    && anvil --version | grep -q '^anvil Version: 1.7.1' \
    && npm cache clean --force
# The chain state survives restarts here (compose mounts a volume), so the signer's nonces in the
# database stay in step with the hot wallet's nonces on chain.
RUN install -d -o node -g node /home/node/state
USER node
EXPOSE 8545
# Called directly (not through npx) so SIGTERM reaches anvil, which then dumps --state.
ENTRYPOINT ["anvil", "--host", "0.0.0.0", "--port", "8545", "--chain-id", "31337", "--block-time", "1"]
