// SPDX-License-Identifier: Apache-2.0
// A minimal ERC-20 (EIP-20) for the opledger tests only: 6 decimals, the whole supply minted to
// the deployer. No owner, no minting after deployment, no external imports. Compiled by
// scripts/contracts.sh into TestToken.json, which crates/testkit (token.rs) deploys on anvil.
pragma solidity ^0.8.37;

contract TestToken {
    string public constant name = "opledger Test Token";
    string public constant symbol = "OLTT";
    uint8 public constant decimals = 6;

    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor(uint256 initialSupply) {
        totalSupply = initialSupply;
        balanceOf[msg.sender] = initialSupply;
        emit Transfer(address(0), msg.sender, initialSupply);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        require(spender != address(0), "TestToken: approve to the zero address");
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed != type(uint256).max) {
            require(allowed >= value, "TestToken: insufficient allowance");
            unchecked {
                allowance[from][msg.sender] = allowed - value;
            }
        }
        _transfer(from, to, value);
        return true;
    }

    function _transfer(address from, address to, uint256 value) private {
        require(to != address(0), "TestToken: transfer to the zero address");
        uint256 balance = balanceOf[from];
        require(balance >= value, "TestToken: insufficient balance");
        unchecked {
            balanceOf[from] = balance - value;
        }
        // Cannot overflow: the sum of all balances is totalSupply, fixed at deployment.
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
