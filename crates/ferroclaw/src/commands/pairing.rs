//! `ferroclaw pairing list | approve <code> | revoke <channel> <sender>`: who may talk to
//! the chat channels, in this home's storage (the same the gateways read, so an approval
//! here applies to the next message whichever instance receives it).

use ferroclaw_channels::now_ms;
use std::process::ExitCode;

use clap::Subcommand;
use ferroclaw_channels::pairing;

use crate::cli::GlobalArgs;
use crate::commands::sessions::humantime_ms;
use crate::context::AppContext;

#[derive(Debug, Subcommand)]
pub enum PairingCommand {
    /// Pending codes and approved senders.
    List,
    /// Let the sender who got this code talk to the agent.
    Approve {
        /// The 8-character code the sender was given.
        code: String,
    },
    /// Take a sender's approval back.
    Revoke {
        /// The channel (e.g. telegram).
        channel: String,
        /// The sender's id on the channel.
        sender: String,
        #[arg(long, default_value = "default")]
        account: String,
    },
}

pub async fn run(global: &GlobalArgs, cmd: PairingCommand) -> anyhow::Result<ExitCode> {
    let ctx = AppContext::load(global).await?;
    let store = ctx
        .store
        .channels()
        .ok_or_else(|| anyhow::anyhow!("this storage keeps no channel approvals"))?;
    match cmd {
        PairingCommand::List => {
            let pending = store.pairing_requests(now_ms()).await?;
            let approved = store.approved_senders().await?;
            if pending.is_empty() && approved.is_empty() {
                println!("no pairing requests and no approved senders");
            }
            for p in pending {
                println!(
                    "pending\t{}\t{}:{}\t{}\t{}\texpires {}",
                    p.code,
                    p.channel,
                    p.account,
                    p.sender_id,
                    p.sender_name.unwrap_or_default(),
                    humantime_ms(p.expires_at)
                );
            }
            for a in approved {
                println!(
                    "approved\t{}:{}\t{}\t{}\tsince {}",
                    a.channel,
                    a.account,
                    a.sender_id,
                    a.sender_name.unwrap_or_default(),
                    humantime_ms(a.approved_at)
                );
            }
        }
        PairingCommand::Approve { code } => {
            let code = pairing::normalise(&code);
            if !pairing::is_code(&code) {
                anyhow::bail!(
                    "`{code}` is not a pairing code (8 characters of {})",
                    String::from_utf8_lossy(pairing::ALPHABET)
                );
            }
            let Some(a) = store.approve_pairing(&code, Some("cli"), now_ms()).await? else {
                eprintln!("no valid pairing code `{code}` (expired, used, or never issued)");
                return Ok(ExitCode::FAILURE);
            };
            tracing::info!(channel = %a.channel, sender = %a.sender_id, "security.channels: sender approved");
            println!(
                "approved {} {} on {}:{}",
                a.sender_id,
                a.sender_name.unwrap_or_default(),
                a.channel,
                a.account
            );
        }
        PairingCommand::Revoke {
            channel,
            sender,
            account,
        } => {
            if !store.revoke_sender(&channel, &account, &sender).await? {
                eprintln!("{sender} was not approved on {channel}:{account}");
                return Ok(ExitCode::FAILURE);
            }
            tracing::info!(%channel, %sender, "security.channels: approval revoked");
            println!("revoked {sender} on {channel}:{account}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
