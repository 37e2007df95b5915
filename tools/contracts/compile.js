// Compiles TestToken.sol with the solc-js pinned in package.json and writes the artifact
// { contract, solc, abi, bytecode } as JSON (2-space indent, trailing newline):
//
//   node compile.js [OUT]      OUT defaults to TestToken.json next to this file
//
// Run it through scripts/contracts.sh (compile, check), which installs solc with npm ci first.
// The settings below are fixed so that the output is byte-for-byte reproducible: the same
// source and compiler always give the same file (the bytecode ends with the CBOR metadata,
// which hashes the source text, so any change to TestToken.sol changes it).
"use strict";

const fs = require("fs");
const path = require("path");
const solc = require("solc");

const CONTRACT = "TestToken";
const SOURCE = `${CONTRACT}.sol`;
// Explicit rather than solc's default, which moves with each release; anvil 1.7.1 runs every
// opcode of cancun (PUSH0, MCOPY, transient storage).
const EVM_VERSION = "cancun";
const OPTIMIZER_RUNS = 200;

function fail(message) {
  process.stderr.write(`[compile.js] error: ${message}\n`);
  process.exit(1);
}

const here = __dirname;
const out = path.resolve(process.argv[2] || path.join(here, `${CONTRACT}.json`));
if (process.argv.length > 3) fail("usage: node compile.js [OUT]");

// The loaded compiler must be the one pinned in package.json (a stale node_modules is refused).
const pinned = JSON.parse(fs.readFileSync(path.join(here, "package.json"), "utf8"))
  .dependencies.solc;
const version = solc.version().replace(/\.Emscripten\.clang$/, "");
if (!version.startsWith(`${pinned}+commit.`)) {
  fail(`loaded solc ${version}, but package.json pins ${pinned}: run scripts/contracts.sh compile`);
}

const input = {
  language: "Solidity",
  sources: { [SOURCE]: { content: fs.readFileSync(path.join(here, SOURCE), "utf8") } },
  settings: {
    optimizer: { enabled: true, runs: OPTIMIZER_RUNS },
    evmVersion: EVM_VERSION,
    outputSelection: { [SOURCE]: { [CONTRACT]: ["abi", "evm.bytecode.object"] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));

// Warnings are errors too: the test token must compile cleanly.
const problems = output.errors || [];
for (const problem of problems) {
  process.stderr.write(problem.formattedMessage || `${problem.severity}: ${problem.message}\n`);
}
if (problems.length > 0) fail(`${problems.length} compiler error(s) or warning(s) in ${SOURCE}`);

const contract = output.contracts?.[SOURCE]?.[CONTRACT];
const bytecode = contract?.evm?.bytecode?.object;
if (!contract || !Array.isArray(contract.abi) || !/^([0-9a-f]{2})+$/.test(bytecode || "")) {
  fail(`solc returned no ABI or bytecode for ${CONTRACT}`);
}

const artifact = { contract: CONTRACT, solc: version, abi: contract.abi, bytecode: `0x${bytecode}` };
fs.writeFileSync(out, `${JSON.stringify(artifact, null, 2)}\n`);
process.stderr.write(
  `[compile.js] ${CONTRACT}: solc ${version}, ${EVM_VERSION}, optimizer ${OPTIMIZER_RUNS} runs, ` +
    `${bytecode.length / 2} bytes of init code -> ${out}\n`,
);
