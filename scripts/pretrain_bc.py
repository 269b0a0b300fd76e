"""Behaviour-clone a policy from demonstrations. Config: conf/pretrain_bc.yaml; e.g.

python scripts/pretrain_bc.py dataset=demos/LiftCube_10.npz
python scripts/pretrain_bc.py dataset=demos/LiftCube_10.npz policy=tokenized_factorized output=bc_tok.pt
"""

from grpo_robot.cli import pretrain_bc_main

if __name__ == "__main__":
    pretrain_bc_main()
