//! Building the original transfer a payload asks for: its wallet, network, asset, fees and the
//! payload's fee cap.

use super::error::SignerError;
use super::signer::Signer;
use crate::config::NetworkConfig;
use crate::wallets::Wallet;
use alloy_primitives::{Address, U256};
use opledger_domain::ids::TenantId;
use opledger_domain::payload::WithdrawalPayload;
use opledger_evm::signer::SignError;
use opledger_evm::tx::{self, TransferKind, TransferRequest};

impl Signer {
    fn wallet(
        &self,
        tenant: TenantId,
        payload: &WithdrawalPayload,
    ) -> Result<(&Wallet, &NetworkConfig), SignerError> {
        let network = self
            .config
            .networks
            .get(payload.network.as_str())
            .ok_or(SignerError::NotConfigured("network"))?;
        let wallet = self
            .wallets
            .get(tenant, payload.network.as_str())
            .ok_or(SignerError::NotConfigured("wallet"))?;
        Ok((wallet, network))
    }

    /// The wallet and the transfer (nonce left at 0) the payload asks for, within its fee cap.
    pub(super) fn plan(
        &self,
        tenant: TenantId,
        payload: &WithdrawalPayload,
    ) -> Result<(Wallet, TransferRequest), SignerError> {
        let (wallet, network) = self.wallet(tenant, payload)?;
        // EVM transfers here carry no memo (a native transfer has no calldata, an ERC-20 transfer
        // exactly its `transfer` call): an approved memo could not be executed.
        if payload.memo.is_some() {
            return Err(SignerError::MemoNotExecutable);
        }
        let to: Address = payload
            .destination
            .as_str()
            .parse()
            .map_err(|_| SignerError::NotConfigured("destination format"))?;
        let amount = U256::from(payload.amount.get());
        let (kind, gas_limit) = if payload.asset.as_str() == network.native_asset {
            (
                TransferKind::Native { value: amount },
                network.gas_limit_native,
            )
        } else {
            let token = network
                .tokens
                .get(payload.asset.as_str())
                .ok_or(SignerError::NotConfigured("asset"))?;
            let token: Address = token
                .parse()
                .map_err(|_| SignerError::NotConfigured("token address"))?;
            (
                TransferKind::Erc20 { token, amount },
                network.gas_limit_erc20,
            )
        };
        let request = TransferRequest {
            chain_id: network.chain_id,
            nonce: 0,
            to,
            kind,
            gas_limit,
            max_fee_per_gas: network.max_fee_per_gas.0,
            max_priority_fee_per_gas: network.max_priority_fee_per_gas.0,
        };
        tx::build(&request).map_err(SignError::from)?;
        if tx::max_network_fee(&request) > payload.fee_cap.get() {
            return Err(SignerError::FeeCapExceeded);
        }
        Ok((wallet.clone(), request))
    }
}
